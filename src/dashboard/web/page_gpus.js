// GPUs: the fleet's state now, the "now" table (one row per GPU or slice: its state and
// activity, who holds it, for how long it has been idle and what that has cost, sorted by
// that cost), the heatmap of every GPU x hour (MIG slices under their parent; cells mostly
// unallocated, unavailable or unmonitored in their buckets' colours), and who holds each
// GPU now (the right-hand column, coloured by team, and the table below).
import {getJson, getOptional} from './api.js';
import {h, section, notice, fig, tid, ratio} from './dom.js';
import {formatTime, formatCount, formatDuration} from './format.js';
import {drawHeatmap, cellAt, legendCanvas, NULL_COLOR, HELD_IDLE_COLOR} from './heatmap.js';
import {BUCKET_COLORS, BUCKET_LABELS, stableColors} from './charts.js';
import {jobLink, teamHref} from './page_jobs.js';
import {SortableTable, moneyColumn} from './table.js';

const STATES = ['active', 'allocated_idle', 'unallocated', 'unavailable', 'unmonitored'];
const nowFilter = {text: '', state: ''};

// "3" for a GPU, "3 · slice 1" for a MIG slice.
export function deviceIndexLabel(d) {
  return d.slice_index === undefined || d.slice_index === null ? String(d.index ?? '—') : `${d.index} · slice ${d.slice_index}`;
}

// A state as a coloured tag, in its bucket's colour.
export function stateTag(state) {
  return h('span', {class: 'state-tag', 'data-state': state},
    h('span', {class: 'swatch', style: {background: BUCKET_COLORS[state] || NULL_COLOR}}), BUCKET_LABELS[state] || state);
}

// How old a sample is, and whether that is past the staleness limit.
export function sampleAge(nowMs, lastSample, limitSeconds) {
  if (!lastSample) return {ms: null, stale: true};
  const ms = nowMs - Date.parse(lastSample);
  return {ms, stale: limitSeconds > 0 && ms > limitSeconds * 1000};
}

const HIDDEN_COLOR = '#868e96';

export class GpusPage {
  constructor() {
    this.summary = h('div', {class: 'kpis'});
    this.canvas = h('canvas', {class: 'heatmap', testid: 'heatmap', role: 'img', 'aria-label': 'GPU utilization heatmap'});
    this.tooltip = h('div', {class: 'tooltip', hidden: true, testid: 'heatmap-tooltip'});
    this.canvasWrap = h('div', {class: 'heatmap-wrap'}, this.canvas, this.tooltip);
    this.legend = h('div', {class: 'legend'});
    this.heatNote = h('div');
    this.holders = new SortableTable('holders', [
      {key: 'job', label: 'job', sort: (r) => r.job, cell: (r) => (r.hidden ? h('span', {class: 'muted'}, 'another team') : jobLink(r.job))},
      {key: 'team', label: 'team', sort: (r) => r.team, cell: (r) => (r.team ? h('a', {href: teamHref(r.team)}, r.team) : '—')},
      {key: 'kind', label: 'kind', sort: (r) => r.kind, cell: (r) => r.kind || '—'},
      {key: 'user', label: 'user', sort: (r) => r.user, cell: (r) => r.user || '—'},
      {key: 'gpus', label: 'GPUs / slices', num: true, sort: (r) => r.devices.length,
        cell: (r) => fig(String(r.devices.length), r.devices.length, r.hidden ? 'holder-gpus-hidden' : tid('holder-gpus', r.job))},
      {key: 'nodes', label: 'nodes', sort: (r) => r.nodes.join(','),
        cell: (r) => (r.nodes.length > 6 ? `${r.nodes.slice(0, 6).join(', ')} and ${r.nodes.length - 6} more` : r.nodes.join(', '))},
      {key: 'since', label: 'since', sort: (r) => r.since, cell: (r) => formatTime(r.since)},
    ], {defaultSort: {key: 'gpus', dir: -1}, rowTestId: (r) => (r.hidden ? 'holder-row-hidden' : tid('holder-row', r.job))});
    this.asOf = h('p', {class: 'muted as-of', testid: 'gpus-as-of'});
    this.nowText = h('input', {type: 'search', placeholder: 'filter: node, job, team, user…', value: nowFilter.text,
      testid: 'now-filter-text', 'aria-label': 'filter'});
    this.nowState = h('select', {testid: 'now-filter-state', 'aria-label': 'state'},
      h('option', {value: ''}, 'every state'), ...STATES.map((st) => h('option', {value: st}, BUCKET_LABELS[st])));
    this.nowState.value = nowFilter.state;
    const onFilter = () => {
      nowFilter.text = this.nowText.value;
      nowFilter.state = this.nowState.value;
      this.applyNow();
    };
    this.nowText.addEventListener('input', onFilter);
    this.nowState.addEventListener('change', onFilter);
    this.nowCount = h('span', {class: 'muted'});
    const holderOf = (r) => (r.holders || [])[0] || null;
    const idleCost = moneyColumn('idle_cost', 'idle cost so far', (r) => r.idle_cost, (r) => tid('now-idle-cost', r.uuid),
      {totalTestId: 'now-idle-cost-total'});
    this.now = new SortableTable('now', [
      {key: 'node', label: 'node', sort: (r) => r.node, cell: (r) => r.node},
      {key: 'index', label: 'GPU', num: true, sort: (r) => r.index * 100 + (r.slice_index ?? -1),
        csv: (r) => deviceIndexLabel(r), cell: (r) => h('span', {title: r.uuid, testid: tid('now-index', r.uuid)}, deviceIndexLabel(r))},
      {key: 'model', label: 'model', sort: (r) => r.mig_profile || r.model, cell: (r) => (r.mig_profile ? `MIG ${r.mig_profile}` : r.model)},
      {key: 'pool', label: 'pool', sort: (r) => r.pool, cell: (r) => r.pool || '—'},
      {key: 'state', label: 'state now', sort: (r) => STATES.indexOf(r.state), csv: (r) => r.state,
        cell: (r) => h('span', {testid: tid('now-state', r.uuid)}, stateTag(r.state))},
      {key: 'activity', label: 'activity', num: true, sort: (r) => (r.activity ? r.activity.ratio : null),
        cell: (r) => (r.activity ? ratio(r.activity.ratio, tid('now-activity', r.uuid)) : '—')},
      {key: 'job', label: 'job', sort: (r) => (holderOf(r) ? holderOf(r).job || '~hidden' : null),
        cell: (r) => holderCell(r.holders, (x) => (x.hidden ? h('span', {class: 'muted'}, 'another team') : jobLink(x.job)))},
      {key: 'team', label: 'team', sort: (r) => (holderOf(r) ? holderOf(r).team : null),
        cell: (r) => holderCell(r.holders, (x) => (x.team ? h('a', {href: teamHref(x.team)}, x.team) : '—'))},
      {key: 'user', label: 'user', sort: (r) => (holderOf(r) ? holderOf(r).user : null), cell: (r) => holderCell(r.holders, (x) => x.user || '—')},
      {key: 'kind', label: 'kind', sort: (r) => (holderOf(r) ? holderOf(r).kind : null), cell: (r) => holderCell(r.holders, (x) => x.kind || '—')},
      {key: 'idle_for', label: 'idle for', num: true, sort: (r) => r.idle_seconds, csv: (r) => r.idle_seconds,
        cell: (r) => (r.idle_seconds === null || r.idle_seconds === undefined ? '—'
          : fig(`${r.idle_since_clipped ? '> ' : ''}${formatDuration(r.idle_seconds * 1000)}`, r.idle_seconds, tid('now-idle-for', r.uuid),
            {title: `idle since ${formatTime(r.idle_since)}`}))},
      idleCost,
      {key: 'age', label: 'last sample', num: true, sort: (r) => r.age.ms, csv: (r) => r.last_sample || '',
        cell: (r) => h('span', {class: r.age.stale ? 'stale' : undefined, title: r.last_sample ? formatTime(r.last_sample) : 'never'},
          r.age.ms === null ? 'never' : `${formatDuration(r.age.ms)} ago`)},
    ], {defaultSort: {key: 'idle_cost', dir: -1}, rowTestId: (r) => tid('now-row', r.uuid), limit: 25});
    this.el = h('div', {class: 'page page-gpus'}, h('h1', {}, 'GPUs'), this.summary, this.asOf,
      section('Now: every GPU and slice, by idle cost so far',
        h('div', {class: 'filters'}, this.nowText, this.nowState, this.nowCount), this.now.el),
      section('Effective utilization per GPU and hour', this.heatNote, this.legend, this.canvasWrap),
      section('Held now, by job', this.holders.el));
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => { this.tooltip.hidden = true; });
    this.resize = new ResizeObserver(() => {
      const w = this.canvasWrap.clientWidth;
      if (this.lastWidth && Math.abs(w - this.lastWidth) > 4 && this.data) this.draw();
    });
    this.resize.observe(this.canvasWrap);
  }

  async load({win}) {
    // The heatmap's cells carry what tells a held-idle cell from an unallocated one (an
    // admin's: the bucket that took most of each hour), so one answer draws them.
    const [heatmap, fleet] = await Promise.all([
      getOptional('/api/v1/heatmap', {from: win.from, to: win.to}),
      getJson('/api/v1/fleet'),
    ]);
    return {heatmap, fleet};
  }

  render(data) {
    this.data = data;
    const fleet = data.fleet;
    const nowMs = Date.parse(fleet.now);
    this.byUuid = new Map((fleet.devices || []).map((d) => [d.uuid, d]));
    const teams = [...new Set((fleet.devices || []).flatMap((d) => (d.holders || []).map((x) => x.team)).filter(Boolean))];
    this.teamColor = stableColors(teams);
    const states = (fleet.totals && fleet.totals.by_state) || {};
    // The "now" figures are as old as the freshest sample: past the staleness limit they
    // describe a fleet that is no longer reporting, and say so in grey.
    let freshest = null;
    let limit = 0;
    for (const d of fleet.devices || []) {
      if (d.last_sample && (!freshest || d.last_sample > freshest)) freshest = d.last_sample;
      limit = Math.max(limit, d.staleness_limit_seconds || 0);
    }
    const age = sampleAge(nowMs, freshest, limit);
    this.summary.classList.toggle('stale', age.stale);
    this.summary.dataset.stale = String(age.stale);
    this.summary.replaceChildren(
      summaryTile('GPUs', fleet.totals ? fleet.totals.gpus : null, 'fleet-gpus'),
      summaryTile('MIG slices', fleet.totals ? fleet.totals.mig_slices : null, 'fleet-mig-slices'),
      ...STATES.map((st) => summaryTile(`${BUCKET_LABELS[st]} now`, states[st] || 0, `fleet-state-${st}`, BUCKET_COLORS[st])));
    this.asOf.replaceChildren(ageText(age, freshest, limit));
    this.asOf.classList.toggle('stale', age.stale);
    this.nowRows = (fleet.devices || []).map((d) => ({...d, age: sampleAge(nowMs, d.last_sample, d.staleness_limit_seconds)}));
    this.applyNow();
    if (!data.heatmap) {
      this.heatNote.replaceChildren(notice('This server has no /api/v1/heatmap.', 'warn'));
      this.canvas.hidden = true;
    } else {
      const kinds = attachCellKinds(data.heatmap);
      // Within a node, by GPU index, each GPU followed by its slices (the rows' labels).
      const place = (d) => {
        const n = this.byUuid.get(d.uuid);
        return n ? [n.index, n.slice_index ?? -1] : [1e9, 0];
      };
      const nodeOrder = new Map();
      for (const d of data.heatmap.devices) if (!nodeOrder.has(d.node)) nodeOrder.set(d.node, nodeOrder.size);
      data.heatmap.devices.sort((a, b) => nodeOrder.get(a.node) - nodeOrder.get(b.node) ||
        place(a)[0] - place(b)[0] || place(a)[1] - place(b)[1]);
      const others = data.heatmap.devices.some((d) => d.held_by_other_teams);
      this.heatNote.replaceChildren(h('p', {class: 'muted'},
        `${data.heatmap.devices.length} GPUs and slices × ${data.heatmap.times.length} hours, ${formatTime(data.heatmap.from)} – ${formatTime(data.heatmap.to)}. `,
        data.heatmap.value ? `Cells: ${data.heatmap.value}` : '',
        kinds ? '; an hour mostly unallocated, unavailable or unmonitored is drawn in that colour instead. ' : '. ',
        'Rows: node and GPU index. The right-hand column is the team holding the GPU now.',
        others ? ' Time held by other teams is not shown.' : ''));
      this.canvas.hidden = false;
      this.draw();
    }
    this.legend.replaceChildren(
      h('span', {class: 'swatch', style: {background: HELD_IDLE_COLOR}}), h('span', {}, '0% (held, idle)'),
      legendCanvas(160), h('span', {}, '100% active'),
      ...(data.heatmap && data.heatmap.devices.some((d) => d.mostly) ? [
        h('span', {class: 'swatch', style: {background: BUCKET_COLORS.unallocated}}), h('span', {}, 'unallocated'),
        h('span', {class: 'swatch', style: {background: BUCKET_COLORS.unavailable}}), h('span', {}, 'unavailable')] : []),
      h('span', {class: 'swatch', style: {background: NULL_COLOR, border: '1px solid #ced4da'}}),
      h('span', {}, data.heatmap && data.heatmap.devices.some((d) => d.mostly) ? 'unmonitored / no data' : 'no data / not held'),
      h('span', {class: 'legend-sep'}, 'holder now:'),
      ...[...this.teamColor.entries()].map(([t, c]) => [h('span', {class: 'swatch', style: {background: c}}), h('span', {}, t)]).flat(),
      h('span', {class: 'swatch', style: {background: HIDDEN_COLOR}}), h('span', {}, 'another team'));
    this.holders.setRows(holderRows(fleet));
  }

  applyNow() {
    const text = nowFilter.text.trim().toLowerCase();
    const rows = (this.nowRows || []).filter((r) => {
      if (nowFilter.state && r.state !== nowFilter.state) return false;
      if (text) {
        const hay = [r.node, r.uuid, r.model, r.mig_profile, r.pool, r.state,
          ...(r.holders || []).flatMap((x) => [x.job, x.team, x.user, x.kind, x.project])].join(' ').toLowerCase();
        if (!hay.includes(text)) return false;
      }
      return true;
    });
    this.nowCount.textContent = `${rows.length} of ${(this.nowRows || []).length} GPUs and slices`;
    this.now.setRows(rows);
  }

  holderColor(device) {
    const d = this.byUuid.get(device.uuid);
    const holders = (d && d.holders) || [];
    if (!holders.length) return null;
    if (holders[0].hidden) return HIDDEN_COLOR;
    return this.teamColor.get(holders[0].team) || HIDDEN_COLOR;
  }

  draw() {
    this.lastWidth = this.canvasWrap.clientWidth;
    const r = drawHeatmap(this.canvas, this.data.heatmap, (d) => this.holderColor(d), (d) => this.rowLabel(d));
    this.drawMs = r.drawMs;
  }

  // "GPU 3" or "└ 3g.40gb #1" (the node is drawn beside its group).
  rowLabel(device) {
    const d = this.byUuid.get(device.uuid);
    if (!d) return null;
    return d.slice_index === undefined || d.slice_index === null ? `GPU ${d.index}` : `└ ${d.mig_profile || 'MIG'} #${d.slice_index}`;
  }

  hover(e) {
    const rect = this.canvas.getBoundingClientRect();
    const x = e.clientX - rect.left;
    const y = e.clientY - rect.top;
    const cell = cellAt(this.canvas, x, y);
    if (!cell) {
      this.tooltip.hidden = true;
      return;
    }
    const d = cell.device;
    const now = this.byUuid.get(d.uuid);
    const holders = ((now && now.holders) || []).map((x) => (x.hidden ? 'another team' : `${x.job} (${x.team || 'no team'}, ${x.kind || ''})`));
    const kind = cell.step !== null && cell.step !== undefined && d.kinds ? d.kinds[cell.step] : null;
    const lines = [
      h('strong', {}, `${d.node} · ${now ? `GPU ${deviceIndexLabel(now)}` : ''} · ${d.mig_profile ? `MIG ${d.mig_profile}` : d.model}`),
      h('div', {class: 'muted'}, d.uuid),
      cell.step !== null && cell.step !== undefined
        ? h('div', {}, `${formatTime(cell.time * 1000)}: `, h('strong', {},
          kind ? `mostly ${BUCKET_LABELS[kind]}` : cell.value === null ? 'no data / not held' : `${cell.value}%${cell.value === 0 ? ' (held, idle)' : ''}`),
          d.allocated && d.allocated[cell.step] !== null ? ` · ${d.allocated[cell.step]}% held by jobs` : '')
        : null,
      h('div', {}, `now: ${holders.length ? holders.join(', ') : 'not held'}${now ? ` · ${now.state.replace('_', ' ')}` : ''}`),
    ];
    this.tooltip.replaceChildren(...lines.filter(Boolean));
    this.tooltip.hidden = false;
    const wrap = this.canvasWrap.getBoundingClientRect();
    const tx = Math.min(e.clientX - wrap.left + 14, wrap.width - 320);
    this.tooltip.style.left = `${Math.max(0, tx)}px`;
    this.tooltip.style.top = `${e.clientY - wrap.top + 14}px`;
  }
}

function summaryTile(label, n, testid, color) {
  return h('div', {class: 'kpi kpi-small'},
    h('div', {class: 'kpi-label'}, color ? h('span', {class: 'swatch', style: {background: color}}) : null, label),
    h('div', {class: 'kpi-value'}, fig(formatCount(n), n, testid)));
}

// "As of 14:02 UTC (latest sample 40s ago)"; past the limit, how stale it is.
function ageText(age, freshest, limitSeconds) {
  if (!freshest) return 'No device has sent a sample yet.';
  const when = `latest sample ${formatTime(freshest)}, ${formatDuration(age.ms)} ago`;
  return age.stale
    ? `Stale: ${when}, past the staleness limit of ${formatDuration(limitSeconds * 1000)}; every device reads as unmonitored.`
    : `Now: ${when}.`;
}

// Several holders of one GPU (time-slicing): one line each.
function holderCell(holders, fn) {
  if (!holders || !holders.length) return h('span', {class: 'muted'}, '—');
  return holders.length === 1 ? fn(holders[0]) : h('span', {class: 'stack'}, holders.map((x) => h('div', {}, fn(x))));
}

// Marks each heatmap cell mostly unallocated, unavailable or unmonitored (the API's
// `mostly`, an admin's heatmap), so the heatmap draws those in their colours; other cells
// keep their utilization. Returns whether any device had them.
export function attachCellKinds(heatmap) {
  let any = false;
  for (const d of heatmap.devices) {
    if (!d.mostly) continue;
    d.kinds = d.mostly;
    any = true;
  }
  return any;
}

// One row per job holding GPUs now (and one for all of other teams' holds).
function holderRows(fleet) {
  const byJob = new Map();
  for (const d of fleet.devices || []) {
    for (const x of d.holders || []) {
      const key = x.hidden ? '\u0000hidden' : x.job;
      if (!byJob.has(key)) {
        byJob.set(key, {job: x.job, team: x.hidden ? null : x.team, kind: x.kind, user: x.user, since: x.since,
          hidden: !!x.hidden, devices: [], nodes: []});
      }
      const r = byJob.get(key);
      r.devices.push(d.uuid);
      if (!r.nodes.includes(d.node)) r.nodes.push(d.node);
      if (x.since && (!r.since || x.since < r.since)) r.since = x.since;
    }
  }
  return [...byJob.values()];
}
