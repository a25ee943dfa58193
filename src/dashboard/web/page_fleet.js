// Fleet: how well the capacity is used over the window, against the target; where the
// GPU-hours and the money went (the five buckets); per pool; training and serving apart.
import {getJson, getUsage, getOptionalSeries} from './api.js';
import {h, kpi, section, notice, money, ratio, hours, tid} from './dom.js';
import {formatRatio, moneyToNumber, formatTime, formatDuration, formatHours} from './format.js';
import {SortableTable, moneyColumn, hoursColumn} from './table.js';
import {drawChart, BUCKETS, BUCKET_LABELS, BUCKET_COLORS, UTIL_COLOR, KIND_COLORS, stableColors, TARGET_COLOR, constantSeries} from './charts.js';

let bucketUnit = 'hours';  // kept across refreshes and visits: 'hours' | 'money'

// The last non-null value of a series and its index.
export function lastValue(values) {
  for (let i = (values || []).length - 1; i >= 0; i--) {
    if (values[i] !== null && values[i] !== undefined) return {value: values[i], index: i};
  }
  return {value: null, index: -1};
}

// Stacked bucket layers of a series group, in GPU-hours or money (floats: drawing only).
export function bucketLayers(group, unit) {
  return BUCKETS.filter((b) => group.gpu_hours && group.gpu_hours[b]).map((b) => ({
    label: BUCKET_LABELS[b],
    color: BUCKET_COLORS[b],
    values: unit === 'money' ? group.cost[b].map(moneyToNumber) : group.gpu_hours[b],
  }));
}

export function utilizationSpec(times, groups, target, height = 240) {
  const series = groups.map((g) => ({label: g.label, color: g.color, values: g.values, width: 2}));
  if (target !== null && target !== undefined) {
    series.push({label: `target ${formatRatio(target, 0)}`, color: TARGET_COLOR, dash: true, values: constantSeries(times, target), width: 1.5});
  }
  return {kind: 'line', times, series, yFormat: 'ratio', height};
}

// The five buckets of a usage total as a table (CSV, and the total row: the capacity).
export function bucketTable(total, testPrefix) {
  const totalHours = total.gpu_hours || 0;
  const rows = BUCKETS.map((b) => ({bucket: b, ...((total.buckets && total.buckets[b]) || {gpu_hours: 0, cost: '0'})}));
  const t = new SortableTable(`${testPrefix}-buckets`, [
    {key: 'bucket', label: 'bucket', sort: (r) => BUCKETS.indexOf(r.bucket), csv: (r) => r.bucket,
      cell: (r) => h('span', {}, h('span', {class: 'swatch', style: {background: BUCKET_COLORS[r.bucket]}}), BUCKET_LABELS[r.bucket])},
    hoursColumn('hours', 'GPU-hours', (r) => r.gpu_hours, (r) => `${testPrefix}-hours-${r.bucket}`),
    {key: 'share', label: 'share', num: true, sort: (r) => (totalHours > 0 ? r.gpu_hours / totalHours : null),
      cell: (r) => formatRatio(totalHours > 0 ? r.gpu_hours / totalHours : null)},
    moneyColumn('cost', 'cost', (r) => r.cost, (r) => `${testPrefix}-cost-${r.bucket}`),
  ], {defaultSort: {key: 'bucket', dir: 1}});
  t.el.classList.add('compact-wrap');
  t.setRows(rows);
  return t.el;
}

// The fleet's utilization in the last hour with data, saying how old that hour is; past
// the staleness limit (the fleet's: its devices' largest) the figure is grey and says so.
function nowTile(now, series, fleet, info) {
  const tile = kpi('Now (last hour)', ratio(now.value, 'kpi-effective-utilization-now'), null, 'kpi-effective-utilization-now');
  if (now.index < 0) {
    tile.append(h('div', {class: 'kpi-sub'}, 'no hourly series'));
    return tile;
  }
  const hourEnd = (series.times[now.index] + (series.step_seconds || 3600)) * 1000;
  const dataEnd = info.data && info.data.to ? Math.min(hourEnd, Date.parse(info.data.to)) : hourEnd;
  const age = Date.parse(info.now) - dataEnd;
  const limit = Math.max(0, ...((fleet && fleet.devices) || []).map((d) => d.staleness_limit_seconds || 0)) * 1000;
  const stale = limit > 0 && age > limit;
  tile.classList.toggle('stale', stale);
  tile.dataset.stale = String(stale);
  tile.dataset.ageSeconds = String(Math.round(age / 1000));
  tile.append(h('div', {class: 'kpi-sub', testid: 'kpi-now-age'},
    `hour from ${formatTime(series.times[now.index] * 1000)}; data ${formatDuration(Math.max(0, age))} old`,
    stale ? ` (stale: past the ${formatDuration(limit)} limit)` : ''));
  return tile;
}

export class FleetPage {
  constructor() {
    this.kpis = h('div', {class: 'kpis'});
    this.utilChart = h('div', {class: 'chart', testid: 'chart-utilization'});
    this.bucketChart = h('div', {class: 'chart', testid: 'chart-buckets'});
    this.bucketToggle = h('div', {class: 'toggle', role: 'group', 'aria-label': 'unit'},
      ...[['hours', 'GPU-hours'], ['money', 'Money']].map(([k, label]) => h('button', {
        type: 'button', 'data-unit': k, testid: `bucket-unit-${k}`, 'aria-pressed': String(bucketUnit === k),
        onclick: () => { bucketUnit = k; this.drawBuckets(); },
      }, label)));
    this.bucketTableHolder = h('div');
    this.pools = h('div', {class: 'multiples', testid: 'pools'});
    this.kindTable = new SortableTable('kinds', [
      {key: 'kind', label: 'kind', sort: (r) => r.group.kind, cell: (r) => r.group.kind},
      hoursColumn('hours', 'GPU-hours', (r) => r.gpu_hours, (r) => tid('kind-hours', r.group.kind)),
      {key: 'eff', label: 'eff. util', num: true, sort: (r) => r.effective_utilization,
        cell: (r) => ratio(r.effective_utilization, tid('kind-eff', r.group.kind))},
      {key: 'alloc', label: 'alloc. eff', num: true, sort: (r) => r.allocated_efficiency,
        cell: (r) => ratio(r.allocated_efficiency, tid('kind-alloc-eff', r.group.kind))},
      moneyColumn('idle', 'idle cost', (r) => r.buckets.allocated_idle.cost, (r) => tid('kind-idle-cost', r.group.kind)),
      moneyColumn('cost', 'cost', (r) => r.cost, (r) => tid('kind-cost', r.group.kind)),
    ], {defaultSort: {key: 'cost', dir: -1}});
    this.kinds = h('div', {class: 'split'}, this.kindTable.el);
    this.kindChart = h('div', {class: 'chart', testid: 'chart-kinds'});
    this.seriesNotice = h('div');
    this.scopeNote = h('p', {class: 'muted', hidden: true, testid: 'viewer-scope'});
    this.scopeNote2 = h('p', {class: 'muted', hidden: true});
    this.el = h('div', {class: 'page page-fleet'},
      h('h1', {}, 'Fleet'),
      this.kpis,
      this.seriesNotice,
      section('Effective utilization over time', this.utilChart),
      section('Capacity by bucket', h('div', {class: 'panel-tools'}, this.bucketToggle), this.bucketChart, this.bucketTableHolder),
      section('Pools', this.scopeNote, this.pools),
      section('Training and serving', this.scopeNote2, this.kindChart, this.kinds));
  }

  async load({win}) {
    const w = {from: win.from, to: win.to};
    const [usagePool, usageKind, seriesPool, seriesKind, fleet] = await Promise.all([
      getUsage({...w, by: 'pool'}),
      getUsage({...w, by: 'kind'}),
      getOptionalSeries({...w, by: 'pool'}),
      getOptionalSeries({...w, by: 'kind'}),
      getJson('/api/v1/fleet'),
    ]);
    return {usagePool, usageKind, seriesPool, seriesKind, fleet};
  }

  render(data, ctx) {
    this.data = data;
    this.ctx = ctx;
    const {info} = ctx;
    const total = data.usagePool.total;
    const target = info.targets ? info.targets.fleet : null;
    const series = data.seriesPool;
    const now = series ? lastValue(series.total.effective_utilization) : {value: null, index: -1};
    const eff = total.effective_utilization;
    const delta = eff !== null && eff !== undefined && target !== null && target !== undefined ? eff - target : null;
    const idle = total.buckets && total.buckets.allocated_idle;
    this.kpis.replaceChildren(
      kpi('Effective utilization', ratio(eff, 'kpi-effective-utilization'),
        target !== null && target !== undefined
          ? h('span', {class: delta >= 0 ? 'good' : 'bad'}, `target ${formatRatio(target, 0)} (${delta >= 0 ? '+' : ''}${(delta * 100).toFixed(1)} pts)`)
          : 'no target configured', 'kpi-effective-utilization'),
      nowTile(now, series, data.fleet, info),
      kpi('Spend', money(total.cost, 'kpi-spend'),
        idle ? h('span', {}, 'held idle: ', money(idle.cost, 'kpi-idle-cost')) : null, 'kpi-spend'),
      kpi('GPU-hours', hours(total.gpu_hours, 'kpi-gpu-hours'),
        total.unpriced_gpu_hours ? `${formatHours(total.unpriced_gpu_hours)} unpriced` : 'capacity in the window', 'kpi-gpu-hours'),
      kpi('Allocated efficiency', ratio(total.allocated_efficiency, 'kpi-allocated-efficiency'),
        'active / held by jobs', 'kpi-allocated-efficiency'));

    if (!series) {
      this.seriesNotice.replaceChildren(notice('This server has no /api/v1/series: charts over time are not available.', 'warn'));
    } else {
      this.seriesNotice.replaceChildren();
      drawChart(this.utilChart, utilizationSpec(series.times,
        [{label: 'fleet', color: UTIL_COLOR, values: series.total.effective_utilization}], target, 260));
    }
    this.drawBuckets();
    this.bucketTableHolder.replaceChildren(bucketTable(total, 'fleet-bucket'));
    // A viewer sees the fleet's totals but only its own teams' rows.
    const viewer = info.role === 'viewer';
    const scope = `Your teams' jobs only (${(info.teams || []).join(', ')}); the tiles and charts above are the whole fleet's.`;
    for (const n of [this.scopeNote, this.scopeNote2]) {
      n.hidden = !viewer;
      n.textContent = viewer ? scope : '';
    }
    this.renderPools(info);
    this.renderKinds(info);
  }

  drawBuckets() {
    for (const b of this.bucketToggle.querySelectorAll('button')) b.setAttribute('aria-pressed', String(b.dataset.unit === bucketUnit));
    const series = this.data && this.data.seriesPool;
    if (!series) return;
    drawChart(this.bucketChart, {
      kind: 'stack',
      times: series.times,
      series: bucketLayers(series.total, bucketUnit),
      yFormat: bucketUnit === 'money' ? 'money' : 'hours',
      currency: this.ctx ? this.ctx.currency : '',
      height: 260,
    });
  }

  renderPools(info) {
    const rows = this.data.usagePool.rows || [];
    const series = this.data.seriesPool;
    const byPool = new Map((series ? series.groups : []).map((g) => [g.key[0], g]));
    const existing = new Map([...this.pools.children].map((c) => [c.dataset.pool, c]));
    const poolColor = stableColors(rows.map((r) => r.group.pool));
    const cards = rows.map((r) => {
      const pool = r.group.pool;
      const g = byPool.get(pool);
      const target = g && g.target !== null && g.target !== undefined ? g.target
        : (info.targets && info.targets.pools && info.targets.pools[pool] !== undefined ? info.targets.pools[pool] : info.targets && info.targets.fleet);
      let card = existing.get(pool);
      if (!card) {
        card = h('div', {class: 'multiple', 'data-pool': pool, testid: tid('pool', pool)},
          h('h3', {}, pool), h('div', {class: 'multiple-figures'}), h('div', {class: 'chart small'}));
      }
      const below = r.effective_utilization < target;
      card.children[1].replaceChildren(
        h('span', {class: below ? 'bad' : 'good'}, ratio(r.effective_utilization, tid('pool-eff', pool))),
        ` vs target ${formatRatio(target, 0)} · `,
        money(r.cost, tid('pool-cost', pool)), ' · ', hours(r.gpu_hours, tid('pool-hours', pool)), ' GPU-h');
      if (g) {
        drawChart(card.children[2], {...utilizationSpec(series.times,
          [{label: pool, color: poolColor.get(pool), values: g.effective_utilization}], target, 150), legend: false});
      }
      return card;
    });
    this.pools.replaceChildren(...cards);
  }

  renderKinds() {
    const usage = this.data.usageKind;
    const series = this.data.seriesKind;
    this.kindTable.setRows(usage.rows || []);
    if (series) {
      const shown = series.groups.filter((g) => g.key[0] === 'training' || g.key[0] === 'serving');
      const groups = (shown.length ? shown : series.groups).map((g) => ({
        label: g.key[0], color: KIND_COLORS[g.key[0]] || KIND_COLORS.unknown, values: g.effective_utilization}));
      // A kind's utilization is its active time over the time its jobs held GPUs.
      drawChart(this.kindChart, utilizationSpec(series.times, groups, null, 220));
    }
  }
}

