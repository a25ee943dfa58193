// Jobs: every job the token may see, joined with its usage over the window (GPU-hours,
// cost, effective utilization), sortable and filterable; and one job's page.
import {getJson, getOptional, jobPath, getAllJobs, getUsage} from './api.js';
import {h, kpi, section, notice, money, ratio, hours, fig, tid, currencyLabel} from './dom.js';
import {formatTime, formatDuration, formatRatio, addMoney} from './format.js';
import {SortableTable, moneyColumn, hoursColumn} from './table.js';
import {drawChart, BUCKETS, BUCKET_LABELS, BUCKET_COLORS, UTIL_COLOR} from './charts.js';
import {bucketLayers} from './page_fleet.js';

const filterState = new Map();

export function jobHref(id) {
  return `#/jobs/${encodeURIComponent(id)}`;
}

export function teamHref(team) {
  return `#/teams/${encodeURIComponent(team)}`;
}

export function jobLink(id) {
  return h('a', {href: jobHref(id), class: 'job-link', 'data-job': id}, id);
}

// Rows of /usage?by=job as a map job id -> row.
export function usageByJob(usage) {
  const m = new Map();
  for (const r of (usage && usage.rows) || []) m.set(r.group.job, r);
  return m;
}

// The jobs table with its filter bar. `name` keys the kept sort and filter state.
export class JobsTable {
  constructor(name, {showTeamFilter = true, limit = 200} = {}) {
    this.name = name;
    if (!filterState.has(name)) filterState.set(name, {text: '', team: '', kind: '', inWindow: true});
    const st = filterState.get(name);
    this.text = h('input', {type: 'search', placeholder: 'filter: job, project, user, experiment', value: st.text, testid: `${name}-filter-text`, 'aria-label': 'filter'});
    this.team = h('select', {testid: `${name}-filter-team`, 'aria-label': 'team', hidden: !showTeamFilter});
    this.kind = h('select', {testid: `${name}-filter-kind`, 'aria-label': 'kind'});
    this.inWindow = h('input', {type: 'checkbox', testid: `${name}-filter-in-window`});
    this.inWindow.checked = st.inWindow;
    const onChange = () => {
      filterState.set(name, {text: this.text.value, team: this.team.value, kind: this.kind.value, inWindow: this.inWindow.checked});
      this.apply();
    };
    this.text.addEventListener('input', onChange);
    this.team.addEventListener('change', onChange);
    this.kind.addEventListener('change', onChange);
    this.inWindow.addEventListener('change', onChange);
    this.table = new SortableTable(name, [
      {key: 'id', label: 'job', sort: (r) => r.job.id, cell: (r) => jobLink(r.job.id)},
      {key: 'team', label: 'team', sort: (r) => r.job.team, cell: (r) => (r.job.team ? h('a', {href: teamHref(r.job.team)}, r.job.team) : '—')},
      {key: 'project', label: 'project', sort: (r) => r.job.project, cell: (r) => r.job.project || '—'},
      {key: 'experiment', label: 'experiment', sort: (r) => r.job.experiment || null, cell: (r) => r.job.experiment || '—'},
      {key: 'user', label: 'user', sort: (r) => r.job.user, cell: (r) => r.job.user || '—'},
      {key: 'kind', label: 'kind', sort: (r) => r.job.kind, cell: (r) => h('span', {class: `kind kind-${r.job.kind}`}, r.job.kind)},
      {key: 'pool', label: 'pool', sort: (r) => r.job.pool, cell: (r) => r.job.pool || '—'},
      {key: 'gpus', label: 'GPUs', num: true, sort: (r) => r.job.requested_gpus ?? null,
        cell: (r) => (r.job.requested_mig_profile ? r.job.requested_mig_profile : r.job.requested_gpus ?? '—')},
      {key: 'start', label: 'start (UTC)', sort: (r) => r.job.start || null, cell: (r) => shortTime(r.job.start)},
      {key: 'end', label: 'end (UTC)', sort: (r) => r.job.end || '~running', cell: (r) => (r.job.end ? shortTime(r.job.end) : h('span', {class: 'running'}, 'running'))},
      hoursColumn('hours', 'GPU-hours', (r) => (r.usage ? r.usage.gpu_hours : null), (r) => tid('job-hours', r.job.id),
        {totalTestId: `${name}-hours-total`}),
      {key: 'eff', label: 'eff. util', num: true, sort: (r) => (r.usage ? r.usage.effective_utilization : null),
        cell: (r) => (r.usage ? ratio(r.usage.effective_utilization, tid('job-eff', r.job.id)) : '—')},
      moneyColumn('idle_cost', 'idle cost', (r) => (r.usage ? r.usage.buckets.allocated_idle.cost : null),
        (r) => tid('job-idle-cost', r.job.id), {totalTestId: `${name}-idle-cost-total`}),
      moneyColumn('cost', 'cost', (r) => (r.usage ? r.usage.cost : null), (r) => tid('job-cost', r.job.id),
        {totalTestId: `${name}-cost-total`}),
    ], {
      defaultSort: {key: 'cost', dir: -1},
      rowTestId: (r) => tid('job-row', r.job.id),
      rowHref: (r) => jobHref(r.job.id),
      limit,
    });
    this.count = h('span', {class: 'muted'});
    this.el = h('div', {class: 'jobs-table'},
      h('div', {class: 'filters'}, this.text, this.team, this.kind,
        h('label', {class: 'check'}, this.inWindow, ' ran in the window'), this.count),
      this.table.el);
  }

  setData(jobs, usage) {
    const byJob = usageByJob(usage);
    this.rows = jobs.map((job) => ({job, usage: byJob.get(job.id) || null}));
    fillSelect(this.team, 'all teams', [...new Set(jobs.map((j) => j.team).filter(Boolean))].sort(), filterState.get(this.name).team);
    fillSelect(this.kind, 'all kinds', [...new Set(jobs.map((j) => j.kind).filter(Boolean))].sort(), filterState.get(this.name).kind);
    this.apply();
  }

  apply() {
    const st = filterState.get(this.name);
    const text = st.text.trim().toLowerCase();
    const rows = (this.rows || []).filter((r) => {
      if (st.team && r.job.team !== st.team) return false;
      if (st.kind && r.job.kind !== st.kind) return false;
      if (st.inWindow && !(r.usage && r.usage.gpu_hours > 0)) return false;
      if (text) {
        const hay = [r.job.id, r.job.team, r.job.project, r.job.user, r.job.experiment, r.job.pool].join(' ').toLowerCase();
        if (!hay.includes(text)) return false;
      }
      return true;
    });
    this.count.textContent = `${rows.length} of ${(this.rows || []).length} jobs`;
    this.table.setRows(rows);
  }
}

function fillSelect(select, allLabel, values, chosen) {
  const current = chosen || '';
  select.replaceChildren(h('option', {value: ''}, allLabel), ...values.map((v) => h('option', {value: v}, v)));
  select.value = values.includes(current) ? current : '';
}

function shortTime(t) {
  if (!t) return '—';
  return h('time', {datetime: t, title: t}, new Date(t).toISOString().slice(5, 16).replace('T', ' '));
}

export class JobsPage {
  constructor() {
    this.table = new JobsTable('jobs');
    this.el = h('div', {class: 'page page-jobs'}, h('h1', {}, 'Jobs'), section(null, this.table.el));
  }

  async load({win}) {
    const [jobs, usage] = await Promise.all([
      getAllJobs(),
      getUsage({from: win.from, to: win.to, by: 'job'}),
    ]);
    return {jobs: jobs.jobs || [], usage};
  }

  render(data) {
    this.table.setData(data.jobs, data.usage);
  }
}

// One job: its record, its GPUs over time, buckets, idle causes, MFU, serving pressure
// and cost. Figures are the job's whole life (as /api/v1/jobs/{id} reports it), not the
// dashboard's window, and say so.
export class JobPage {
  constructor(id) {
    this.id = id;
    this.head = h('div', {class: 'job-head'});
    this.kpis = h('div', {class: 'kpis'});
    this.chart = h('div', {class: 'chart', testid: 'chart-job'});
    this.chartNote = h('div');
    this.fineChart = h('div', {class: 'chart', testid: 'chart-job-activity'});
    this.fineNote = h('div');
    this.timeline = h('div', {class: 'timeline', testid: 'job-timeline'});
    this.buckets = h('div');
    this.causes = h('div');
    this.devices = h('div');
    this.serving = h('div');
    this.servingSection = section('Serving engine', this.serving);
    this.el = h('div', {class: 'page page-job'},
      h('p', {class: 'crumbs'}, h('a', {href: '#/jobs'}, 'Jobs'), ' / ', h('span', {testid: 'job-id'}, id)),
      this.head, this.kpis,
      section('Activity over time', this.chartNote, this.chart, this.fineNote, this.fineChart),
      section('Allocations (timeline)', this.timeline),
      h('div', {class: 'two'}, section('Buckets', this.buckets), section('Idle causes', this.causes)),
      this.servingSection,
      section('Devices', this.devices));
  }

  async load() {
    const job = await getJson(jobPath(this.id));
    const w = job.window ? {from: job.window.from, to: job.window.to} : {};
    const kind = job.job && job.job.kind;
    const [mfu, usage, serving] = await Promise.all([
      kind === 'serving' ? null : getOptional(`${jobPath(this.id)}/mfu`, w).catch(() => null),
      job.window ? getUsage({...w, by: 'job'}) : null,
      kind === 'serving' ? getOptional(`${jobPath(this.id)}/serving`, w).catch(() => null) : null,
    ]);
    const row = usage ? (usage.rows || []).find((r) => r.group.job === this.id) : null;
    // Where its devices are: node and index (the job's reply names them by uuid).
    const fleet = await getJson('/api/v1/fleet');
    const where = new Map((fleet.devices || []).map((d) => [d.uuid, d]));
    return {job, mfu, mfuWindow: w, usageRow: row, serving, where};
  }

  notFound() {
    this.el.replaceChildren(h('p', {class: 'crumbs'}, h('a', {href: '#/jobs'}, 'Jobs')),
      notice(`No job ${this.id} (or not one this token may see).`, 'warn'));
    this.el.dataset.testid = 'job-not-found';
  }

  render(data) {
    const {job: reply, mfu, usageRow, serving} = data;
    const j = reply.job || {};
    const meta = [
      ['team', j.team ? h('a', {href: teamHref(j.team), testid: 'job-team'}, j.team) : '—'],
      ['project', j.project], ['experiment', j.experiment], ['user', j.user], ['kind', j.kind], ['pool', j.pool],
      ['requested', j.requested_mig_profile ? `MIG ${j.requested_mig_profile}` : j.requested_gpus ? `${j.requested_gpus} GPU(s)` : null],
      ['priority', j.priority], ['submitted', formatTime(j.submit)], ['started', formatTime(j.start)],
      ['ended', j.end ? formatTime(j.end) : 'running'],
      ['duration', j.start ? formatDuration((j.end ? Date.parse(j.end) : Date.parse(reply.window ? reply.window.to : Date.now())) - Date.parse(j.start)) : null],
    ];
    this.head.replaceChildren(
      h('h1', {}, `Job ${j.id || this.id}`, ' ', h('span', {class: `kind kind-${j.kind}`}, j.kind || '')),
      h('dl', {class: 'meta'}, meta.filter(([, v]) => v !== undefined && v !== null && v !== '').map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v)))));

    const totalHours = BUCKETS.reduce((a, b) => a + ((reply.gpu_hours && reply.gpu_hours[b]) || 0), 0);
    const span = reply.window ? `${formatTime(reply.window.from)} – ${formatTime(reply.window.to)}` : '';
    const mfuTile = mfuKpi(mfu, j.kind);
    if (mfuTile) {
      // The span the MFU was asked for (a running job's ends at the time of the request).
      mfuTile.dataset.from = data.mfuWindow.from || '';
      mfuTile.dataset.to = data.mfuWindow.to || '';
    }
    this.kpis.replaceChildren(
      kpi('Cost (job)', money(reply.total_cost, 'job-total-cost'), span, 'job-total-cost'),
      kpi('GPU-hours', hours(totalHours, 'job-gpu-hours'), 'held by the job', 'job-gpu-hours'),
      kpi('Allocated efficiency', ratio(reply.allocated_efficiency, 'job-allocated-efficiency'), 'active / held', 'job-allocated-efficiency'),
      kpi('Idle cost', money(reply.cost ? reply.cost.allocated_idle : null, 'job-idle-cost'), 'held, not active', 'job-idle-cost'),
      ...(mfuTile ? [mfuTile] : []));

    if (reply.series && reply.series.times) {
      this.chartNote.replaceChildren(h('p', {class: 'muted'}, 'GPU-hours per hour by bucket; the line is effective utilization (right axis).'));
      drawJobChart(this.chart, reply.series);
    } else {
      this.chartNote.replaceChildren(notice('No hourly series for this job from this server.', 'info'));
    }
    this.renderActivity(reply.activity);
    this.timeline.replaceChildren(timeline(reply, data.where));
    this.buckets.replaceChildren(bucketsTable(reply));
    this.causes.replaceChildren(causesTable(usageRow));
    this.servingSection.hidden = j.kind !== 'serving';
    if (j.kind === 'serving') this.serving.replaceChildren(servingTable(serving));
    this.devices.replaceChildren(devicesTable(reply, data.where));
  }
}

// The job's own GPUs finer than the hour (the API's `activity`): GPUs held per step,
// active and idle, with allocated efficiency; its latest steps when its life is long.
JobPage.prototype.renderActivity = function renderActivity(a) {
  const steps = a && a.times ? a.times.length : 0;
  this.fineChart.hidden = steps === 0;
  if (!steps) {
    this.fineNote.replaceChildren();
    return;
  }
  const stepHours = a.step_seconds / 3600;
  const gpus = (v) => v / stepHours;
  const clipped = a.requested && a.requested.from !== a.from;
  this.fineNote.replaceChildren(h('p', {class: 'muted'},
    'Every ', fig(formatDuration(a.step_seconds * 1000), a.step_seconds * 1000, 'job-activity-step'),
    ` from the raw samples of the job's own GPUs (${formatTime(a.from)} – ${formatTime(a.to)}`,
    clipped ? ', its latest part: the whole life would read more samples than one page may' : '',
    '): GPUs held, active and idle; the line is allocated efficiency (right axis). Each hour\'s steps add up to the hourly chart.'));
  this.fineChart.dataset.steps = String(steps);
  drawChart(this.fineChart, {
    kind: 'stack',
    times: a.times,
    series: [
      {label: BUCKET_LABELS.active, color: BUCKET_COLORS.active, values: a.gpu_hours.active.map(gpus)},
      {label: BUCKET_LABELS.allocated_idle, color: BUCKET_COLORS.allocated_idle, values: a.gpu_hours.allocated_idle.map(gpus)},
    ],
    yFormat: 'hours',
    yLabel: 'GPUs held',
    height: 200,
    overlay: {label: 'allocated efficiency', color: UTIL_COLOR, values: a.allocated_efficiency || []},
  });
};

function mfuKpi(mfu, kind) {
  if (kind === 'serving') return null;
  if (!mfu) return kpi('MFU', fig('—', '', 'job-mfu'), 'not available', 'job-mfu');
  if (mfu.mfu !== null && mfu.mfu !== undefined) {
    return kpi('MFU', ratio(mfu.mfu, 'job-mfu'), `from ${mfu.basis || 'progress'} reports`, 'job-mfu');
  }
  if (mfu.hardware_estimate !== null && mfu.hardware_estimate !== undefined) {
    return kpi('Tensor activity (estimate, not MFU)', ratio(mfu.hardware_estimate, 'job-mfu-estimate'),
      mfu.hardware_estimate_note || 'tensor-pipe activity × peak: an estimate, not MFU', 'job-mfu-estimate');
  }
  return kpi('MFU', fig('—', '', 'job-mfu'), 'the job reported no progress', 'job-mfu');
}

function drawJobChart(holder, s) {
  const group = {gpu_hours: s.gpu_hours, cost: s.cost || {}};
  const layers = bucketLayers(group, 'hours').filter((l) => l.values.some((v) => v > 0));
  drawChart(holder, {
    kind: 'stack',
    times: s.times,
    series: layers,
    yFormat: 'hours',
    height: 240,
    overlay: {label: 'effective utilization', color: UTIL_COLOR, values: s.effective_utilization || []},
  });
}

// "node-a GPU 3", "dev-06 GPU 2 · slice 1"; the uuid when the device is not in the fleet.
export function deviceName(uuid, where) {
  const d = where && where.get(uuid);
  if (!d) return shortUuid(uuid);
  return `${d.node} GPU ${d.slice_index === undefined || d.slice_index === null ? d.index : `${d.index} · slice ${d.slice_index}`}`;
}

// The job's allocations, one bar per distinct span (a gang job's 32 GPUs held over the
// same span are one bar saying so), labelled with the devices' nodes and indexes.
function timeline(reply, where) {
  const allocs = reply.allocations || [];
  if (!allocs.length || !reply.window) return notice('No allocations recorded.', 'info');
  const from = Date.parse(reply.window.from);
  const to = Date.parse(reply.window.to);
  const span = Math.max(1, to - from);
  const bySpan = new Map();
  for (const a of allocs) {
    const key = `${a.from}|${a.to || ''}`;
    if (!bySpan.has(key)) bySpan.set(key, {from: a.from, to: a.to, devices: []});
    bySpan.get(key).devices.push(a.device);
  }
  const rows = [...bySpan.values()].map((x) => {
    const names = x.devices.map((u) => deviceName(u, where));
    const nodes = [...new Set(x.devices.map((u) => (where && where.get(u) ? where.get(u).node : null)).filter(Boolean))];
    const label = x.devices.length === 1 ? names[0]
      : `${x.devices.length} ${x.devices.some((u) => u.startsWith('MIG-')) ? 'devices' : 'GPUs'}${nodes.length ? ` on ${nodes.length > 3 ? `${nodes.length} nodes` : nodes.join(', ')}` : ''}`;
    const s = Math.max(from, Date.parse(x.from));
    const e = x.to ? Math.min(to, Date.parse(x.to)) : to;
    return h('div', {class: 'tl-row', testid: 'job-timeline-row'},
      h('span', {class: 'tl-label', title: names.join('\n')}, label),
      h('span', {class: 'tl-track'}, h('span', {
        class: `tl-bar ${x.to ? '' : 'tl-open'}`,
        title: `${formatTime(x.from)} – ${x.to ? formatTime(x.to) : 'now'}: ${names.join(', ')}`,
        style: {left: `${((s - from) / span) * 100}%`, width: `${Math.max(0.3, ((e - s) / span) * 100)}%`},
      })));
  });
  return h('div', {},
    h('div', {class: 'tl-axis'}, h('span', {}, formatTime(reply.window.from)), h('span', {}, formatTime(reply.window.to))),
    rows);
}

export function shortUuid(uuid) {
  if (!uuid) return '—';
  const m = /^(GPU|MIG)-([0-9a-f]{8})/.exec(uuid);
  return m ? `${m[1]}-${m[2]}…` : uuid;
}

function bucketsTable(reply) {
  const total = BUCKETS.reduce((a, b) => a + ((reply.gpu_hours && reply.gpu_hours[b]) || 0), 0);
  return h('table', {class: 'data compact'},
    h('thead', {}, h('tr', {}, h('th', {}, 'bucket'), h('th', {class: 'num'}, 'GPU-hours'), h('th', {class: 'num'}, 'share'), h('th', {class: 'num'}, `cost (${currencyLabel()})`))),
    h('tbody', {}, BUCKETS.filter((b) => reply.gpu_hours && (reply.gpu_hours[b] > 0 || b === 'active' || b === 'allocated_idle')).map((b) => h('tr', {},
      h('td', {}, h('span', {class: 'swatch', style: {background: BUCKET_COLORS[b]}}), BUCKET_LABELS[b]),
      h('td', {class: 'num'}, hours(reply.gpu_hours[b], `job-bucket-hours-${b}`)),
      h('td', {class: 'num'}, formatRatio(total > 0 ? reply.gpu_hours[b] / total : null)),
      h('td', {class: 'num'}, money(reply.cost[b], `job-bucket-cost-${b}`, {unit: false}))))));
}

export const CAUSE_LABELS = {
  input_stall: 'input stall (data loading)',
  checkpoint_stall: 'checkpoint stall',
  held_idle: 'held idle (nothing running)',
  communication_stall: 'communication stall',
  other: 'other / unexplained',
};

function causesTable(row) {
  const causes = row && row.buckets && row.buckets.allocated_idle && row.buckets.allocated_idle.causes;
  if (!causes || !Object.keys(causes).length) return notice('No idle time attributed to a cause.', 'info');
  const entries = Object.entries(causes).sort((a, b) => b[1].gpu_hours - a[1].gpu_hours);
  return h('div', {}, h('p', {class: 'muted'}, 'Idle time the job held, by cause, over its span.'), h('table', {class: 'data compact', testid: 'job-causes'},
    h('thead', {}, h('tr', {}, h('th', {}, 'cause'), h('th', {class: 'num'}, 'GPU-hours'), h('th', {class: 'num'}, `cost (${currencyLabel()})`))),
    h('tbody', {}, entries.map(([cause, x]) => h('tr', {},
      h('td', {}, CAUSE_LABELS[cause] || cause.replace(/_/g, ' ')),
      h('td', {class: 'num'}, hours(x.gpu_hours, `job-cause-hours-${cause}`)),
      h('td', {class: 'num'}, money(x.cost, `job-cause-cost-${cause}`, {unit: false})))))));
}

function devicesTable(reply, where) {
  // By node, then GPU index (then uuid, for devices no longer in the fleet).
  const place = (d) => {
    const w = where && where.get(d.device);
    return w ? [w.node, w.index, w.slice_index ?? -1, ''] : ['~', 0, 0, d.device];
  };
  const devices = [...(reply.devices || [])].sort((a, b) => {
    const x = place(a);
    const y = place(b);
    for (let i = 0; i < 4; i++) if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
  });
  if (!devices.length) return notice('No device time recorded.', 'info');
  return h('table', {class: 'data compact'},
    h('thead', {}, h('tr', {}, ['device', 'uuid', 'GPU-hours', 'active', 'idle', `cost (${currencyLabel()})`].map((t, i) => h('th', {class: i > 1 ? 'num' : ''}, t)))),
    h('tbody', {}, devices.map((d) => {
      const tot = BUCKETS.reduce((a, b) => a + (d.gpu_hours[b] || 0), 0);
      const cost = addMoney(BUCKETS.map((b) => d.cost[b]));
      return h('tr', {},
        h('td', {testid: tid('job-device-name', d.device)}, deviceName(d.device, where)),
        h('td', {title: d.device}, h('code', {}, shortUuid(d.device))),
        h('td', {class: 'num'}, hours(tot, tid('job-device-hours', d.device))),
        h('td', {class: 'num'}, hours(d.gpu_hours.active, tid('job-device-active-hours', d.device))),
        h('td', {class: 'num'}, hours(d.gpu_hours.allocated_idle, tid('job-device-idle-hours', d.device))),
        h('td', {class: 'num'}, money(cost, tid('job-device-cost', d.device), {unit: false})));
    })));
}

function servingTable(reply) {
  const engines = (reply && reply.engines) || [];
  if (!engines.length) return notice('No engine metrics for this job.', 'info');
  const q = (o, k) => (o && o[k] !== null && o[k] !== undefined ? o[k] : null);
  const num = (v, d = 1) => (v === null || v === undefined ? '—' : v.toLocaleString('en-US', {maximumFractionDigits: d}));
  return h('table', {class: 'data compact', testid: 'job-serving'},
    h('thead', {}, h('tr', {}, ['engine', 'model', 'tokens/s', 'queue p95', 'KV cache p95', 'batch', `cost / M tokens (${currencyLabel()})`].map((t, i) => h('th', {class: i > 1 ? 'num' : ''}, t)))),
    h('tbody', {}, engines.map((e) => h('tr', {},
      h('td', {}, e.engine), h('td', {}, e.model),
      h('td', {class: 'num'}, fig(num(e.tokens_per_second, 0), e.tokens_per_second, tid('job-serving-tokens-per-second', e.model))),
      h('td', {class: 'num'}, fig(num(q(e.queue_depth, 'p95')), q(e.queue_depth, 'p95'), tid('job-serving-queue-p95', e.model))),
      h('td', {class: 'num'}, fig(formatRatio(q(e.kv_cache_usage, 'p95'), 0), q(e.kv_cache_usage, 'p95'), tid('job-serving-kv-p95', e.model))),
      h('td', {class: 'num'}, fig(num(e.mean_batch_size ?? e.mean_tokens_per_step), e.mean_batch_size ?? e.mean_tokens_per_step,
        tid('job-serving-batch', e.model))),
      h('td', {class: 'num'}, e.cost_per_million_tokens ? money(e.cost_per_million_tokens, tid('job-serving-cost-per-million-tokens', e.model), {unit: false}) : '—')))));
}
