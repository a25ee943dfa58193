// GPUs: the heatmap of every GPU x hour (MIG slices under their parent), who holds each
// GPU now (the right-hand column, colored by team, and the table below), and the
// fleet's state now.
import {getJson, getOptional} from './api.js';
import {h, section, notice, fig, tid} from './dom.js';
import {formatTime, formatCount} from './format.js';
import {drawHeatmap, cellAt, legendCanvas, NULL_COLOR} from './heatmap.js';
import {PALETTE} from './charts.js';
import {jobLink, teamHref} from './page_jobs.js';
import {SortableTable} from './table.js';

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
    this.el = h('div', {class: 'page page-gpus'}, h('h1', {}, 'GPUs'), this.summary,
      section('Effective utilization per GPU and hour', this.heatNote, this.legend, this.canvasWrap),
      section('Held now', this.holders.el));
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => { this.tooltip.hidden = true; });
    this.resize = new ResizeObserver(() => {
      const w = this.canvasWrap.clientWidth;
      if (this.lastWidth && Math.abs(w - this.lastWidth) > 4 && this.data) this.draw();
    });
    this.resize.observe(this.canvasWrap);
  }

  async load({win}) {
    const [heatmap, fleet] = await Promise.all([
      getOptional('/api/v1/heatmap', {from: win.from, to: win.to}),
      getJson('/api/v1/fleet'),
    ]);
    return {heatmap, fleet};
  }

  render(data) {
    this.data = data;
    const fleet = data.fleet;
    this.byUuid = new Map((fleet.devices || []).map((d) => [d.uuid, d]));
    const teams = [...new Set((fleet.devices || []).flatMap((d) => (d.holders || []).map((x) => x.team)).filter(Boolean))].sort();
    this.teamColor = new Map(teams.map((t, i) => [t, PALETTE[i % PALETTE.length]]));
    const states = (fleet.totals && fleet.totals.by_state) || {};
    this.summary.replaceChildren(
      summaryTile('GPUs', fleet.totals ? fleet.totals.gpus : null, 'fleet-gpus'),
      summaryTile('MIG slices', fleet.totals ? fleet.totals.mig_slices : null, 'fleet-mig-slices'),
      ...['active', 'allocated_idle', 'unallocated', 'unavailable', 'unmonitored'].map((s) =>
        summaryTile(s.replace('_', ', '), states[s] || 0, `fleet-state-${s}`)));
    if (!data.heatmap) {
      this.heatNote.replaceChildren(notice('This server has no /api/v1/heatmap.', 'warn'));
      this.canvas.hidden = true;
    } else {
      const others = data.heatmap.devices.some((d) => d.held_by_other_teams);
      this.heatNote.replaceChildren(h('p', {class: 'muted'},
        `${data.heatmap.devices.length} GPUs and slices × ${data.heatmap.times.length} hours, ${formatTime(data.heatmap.from)} – ${formatTime(data.heatmap.to)}. `,
        data.heatmap.value ? `Cells: ${data.heatmap.value}. ` : '',
        'The right-hand column is the team holding the GPU now.',
        others ? ' Time held by other teams is not shown.' : ''));
      this.canvas.hidden = false;
      this.draw();
    }
    this.legend.replaceChildren(
      h('span', {}, '0%'), legendCanvas(200), h('span', {}, '100%'),
      h('span', {class: 'swatch', style: {background: NULL_COLOR, border: '1px solid #ced4da'}}), h('span', {}, 'no data / not held'),
      ...[...this.teamColor.entries()].map(([t, c]) => [h('span', {class: 'swatch', style: {background: c}}), h('span', {}, t)]).flat(),
      h('span', {class: 'swatch', style: {background: HIDDEN_COLOR}}), h('span', {}, 'another team'));
    this.holders.setRows(holderRows(fleet));
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
    const r = drawHeatmap(this.canvas, this.data.heatmap, (d) => this.holderColor(d));
    this.drawMs = r.drawMs;
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
    const lines = [
      h('strong', {}, `${d.node} · ${d.mig_profile ? `MIG ${d.mig_profile}` : d.model}`),
      h('div', {class: 'muted'}, d.uuid),
      cell.step !== null && cell.step !== undefined
        ? h('div', {}, `${formatTime(cell.time * 1000)}: `, h('strong', {}, cell.value === null ? 'no data / not held' : `${cell.value}%`))
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

function summaryTile(label, n, testid) {
  return h('div', {class: 'kpi kpi-small'}, h('div', {class: 'kpi-label'}, label), h('div', {class: 'kpi-value'}, fig(formatCount(n), n, testid)));
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
