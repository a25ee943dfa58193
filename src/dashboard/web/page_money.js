// Waste and chargeback: the API's money answers that had no page. Waste is the largest
// sources of waste over the window, with their causes, in money (/api/v1/waste, admins
// only); chargeback is a month's cost per team and project (/api/v1/chargeback), with
// capacity held by no job as its own lines or, with "share idle", spread over the teams.
// The chargeback page also shows the quotas and budgets of the period the data ends in
// (/api/v1/quotas): each one's burn-down and its projection with the projection's basis.
import {getJson, getOptional} from './api.js';
import {h, kpi, section, notice, money, fig, tid, bar, ratio, hours} from './dom.js';
import {addMoney, parseMicros, formatCount, formatTime, formatHours} from './format.js';
import {SortableTable, moneyColumn, hoursColumn} from './table.js';
import {stateTag} from './page_gpus.js';
import {CAUSE_LABELS} from './page_jobs.js';

// The cause with the most money, as "held idle (62%)".
function topCause(w) {
  const causes = Object.entries(w.idle_causes || {}).filter(([, c]) => parseMicros(c) > 0n);
  if (!causes.length) return null;
  causes.sort((a, b) => (parseMicros(b[1]) > parseMicros(a[1]) ? 1 : -1));
  const [cause, cost] = causes[0];
  const total = parseMicros(w.cost);
  const share = total > 0n ? Number((parseMicros(cost) * 1000n) / total) / 10 : 0;
  return `${(CAUSE_LABELS[cause] || cause.replace(/_/g, ' ')).replace(/ \(.*\)$/, '')} (${share.toFixed(0)}%)`;
}

function causesText(w) {
  return Object.entries(w.idle_causes || {}).filter(([, c]) => parseMicros(c) > 0n)
    .map(([cause, c]) => `${CAUSE_LABELS[cause] || cause}: ${c}`).join('; ');
}

export class WastePage {
  constructor() {
    this.kpis = h('div', {class: 'kpis'});
    this.note = h('div');
    this.table = new SortableTable('waste', [
      {key: 'rank', label: '#', num: true, sort: (r) => r.rank, cell: (r) => String(r.rank)},
      {key: 'what', label: 'source of waste', sort: (r) => r.what, cell: (r) => h('span', {class: 'evidence'}, r.what)},
      {key: 'bucket', label: 'bucket', sort: (r) => r.bucket, cell: (r) => stateTag(r.bucket)},
      hoursColumn('hours', 'GPU-hours', (r) => r.gpu_hours, (r) => tid('waste-hours', r.rank), {totalTestId: 'waste-hours-total'}),
      moneyColumn('cost', 'cost', (r) => r.cost, (r) => tid('waste-cost', r.rank), {totalTestId: 'waste-cost-total'}),
      {key: 'cause', label: 'largest idle cause', sort: (r) => topCause(r), csv: (r) => causesText(r),
        cell: (r) => topCause(r) || h('span', {class: 'muted'}, '—')},
    ], {defaultSort: {key: 'cost', dir: -1}, rowTestId: (r) => tid('waste-row', r.rank)});
    this.el = h('div', {class: 'page page-waste'}, h('h1', {}, 'Waste'), this.kpis, this.note, section(null, this.table.el));
  }

  async load({win, info}) {
    if (info.role !== 'admin') return {forbidden: true};
    return getJson('/api/v1/waste', {from: win.from, to: win.to, limit: 25});
  }

  render(reply, ctx) {
    if (reply.forbidden) {
      this.note.replaceChildren(notice('The sources of waste name every team: only an admin token sees them.', 'info'));
      this.kpis.replaceChildren();
      this.table.setRows([]);
      return;
    }
    const rows = (reply.waste || []).map((w, i) => ({...w, rank: i + 1}));
    const total = addMoney(rows.map((r) => r.cost));
    this.kpis.replaceChildren(
      kpi('Waste listed', money(total, 'waste-total'),
        `the ${rows.length} largest sources, ${formatTime(reply.window.from)} – ${formatTime(reply.window.to)}`, 'waste-total'),
      kpi('Sources', fig(formatCount(rows.length), rows.length, 'waste-count'), 'by money, largest first', 'waste-count'));
    this.note.replaceChildren(h('p', {class: 'muted'},
      'Allocated-idle time per team, project and kind of job (with its estimated causes, docs/idle-causes.md), ',
      'unallocated capacity per pool, unavailable GPUs and silent nodes.'));
    this.table.setRows(rows);
  }
}

// The month a chargeback (or experiments) page shows by default: the one the data ends in.
export function defaultMonth(info) {
  const t = info.data && info.data.to ? info.data.to : info.now;
  return String(t).slice(0, 7);
}

let chargebackMonth = '';
let shareIdle = false;

export class ChargebackPage {
  constructor() {
    this.month = h('input', {type: 'month', testid: 'chargeback-month', 'aria-label': 'month'});
    this.share = h('input', {type: 'checkbox', testid: 'chargeback-share-idle'});
    this.share.checked = shareIdle;
    const onChange = () => {
      chargebackMonth = this.month.value;
      shareIdle = this.share.checked;
      window.gpuledgerApp.refresh();
    };
    this.month.addEventListener('change', onChange);
    this.share.addEventListener('change', onChange);
    this.kpis = h('div', {class: 'kpis'});
    this.note = h('p', {class: 'muted'});
    this.table = new SortableTable('chargeback', [
      {key: 'team', label: 'team', sort: (r) => r.team, cell: (r) => (r.team.startsWith('(') ? h('span', {class: 'muted'}, r.team) : r.team)},
      {key: 'project', label: 'project', sort: (r) => r.project, cell: (r) => r.project || '—'},
      hoursColumn('hours', 'GPU-hours', (r) => r.gpu_hours, (r) => tid('cb-hours', `${r.team}/${r.project}`), {totalTestId: 'cb-hours-total'}),
      hoursColumn('active', 'active GPU-h', (r) => r.active_gpu_hours),
      hoursColumn('idle', 'idle GPU-h', (r) => r.idle_gpu_hours),
      moneyColumn('direct', 'direct cost', (r) => r.direct_cost, (r) => tid('cb-direct', `${r.team}/${r.project}`)),
      moneyColumn('shared', 'shared idle', (r) => r.shared_idle_cost),
      moneyColumn('total', 'total', (r) => r.total_cost, (r) => tid('cb-total', `${r.team}/${r.project}`), {totalTestId: 'cb-total-total'}),
    ], {defaultSort: {key: 'total', dir: -1}, rowTestId: (r) => tid('cb-row', `${r.team}/${r.project}`)});
    this.quotas = h('div', {testid: 'quotas'});
    this.el = h('div', {class: 'page page-chargeback'}, h('h1', {}, 'Chargeback'),
      h('div', {class: 'filters'}, h('label', {}, 'month ', this.month),
        h('label', {class: 'check'}, this.share, ' share idle capacity over the teams'),
        h('a', {href: '#/experiments', testid: 'chargeback-experiments'}, 'Cost per experiment →')),
      this.kpis, section(null, this.note, this.table.el), section('Quotas and budgets', this.quotas));
  }

  async load({info}) {
    const period = chargebackMonth || defaultMonth(info);
    const [reply, quotas] = await Promise.all([
      getJson('/api/v1/chargeback', {period, share_idle: String(shareIdle), format: 'json'}),
      getOptional('/api/v1/quotas'),
    ]);
    return {reply, period, quotas};
  }

  // One row per quota: used against the quota (GPU-hours, money), burn bars, the
  // projection to the period's end and the basis it came from, all as the API gave them.
  renderQuotas(q) {
    if (!q || !(q.quotas || []).length) {
      this.quotas.replaceChildren(h('p', {class: 'muted'}, 'No quotas or budgets: set [[quota]] or [budgets] in the server\'s config (docs/quotas.md).'));
      return;
    }
    const rows = q.quotas.map((x) => {
      const id = `${x.owner}:${x.name}:${x.period}:${x.pool || ''}:${x.model || ''}`;
      const hoursCell = x.gpu_hours_quota === null ? '—' : h('span', {},
        hours(x.gpu_hours_used, tid('quota-hours', id)), ` of ${formatCount(x.gpu_hours_quota)} GPU-h `,
        bar(x.gpu_hours_burn_ratio, {over: 1}), ' ', ratio(x.gpu_hours_burn_ratio, tid('quota-hours-burn', id)),
        x.gpu_hours_projected === null ? '' : h('span', {class: 'muted'}, ` → ${formatHours(x.gpu_hours_projected)} projected`));
      const moneyCell = x.budget === null ? '—' : h('span', {},
        money(x.spent, tid('quota-spent', id)), ' of ', money(x.budget, tid('quota-budget', id)), ' ',
        bar(x.budget_burn_ratio, {over: 1}), ' ', ratio(x.budget_burn_ratio, tid('quota-budget-burn', id)),
        x.projected_cost === null ? '' : h('span', {class: 'muted'}, ' → ', money(x.projected_cost, tid('quota-projected', id)), ' projected'));
      const alerts = [...(x.crossed || []).map((t) => `${(t * 100).toFixed(0)}%`), x.projected_to_exceed ? 'projected to exceed' : null].filter(Boolean);
      return h('tr', {testid: tid('quota-row', id)},
        h('td', {}, `${x.owner} ${x.name}`, x.pool ? ` (pool ${x.pool})` : '', x.model ? ` (${x.model})` : ''),
        h('td', {}, `${x.period} (${x.mode})`),
        h('td', {}, hoursCell), h('td', {}, moneyCell),
        h('td', {testid: tid('quota-alerts', id)}, alerts.length ? alerts.join(', ') : '—'),
        h('td', {class: 'muted', testid: tid('quota-basis', id)}, x.basis.text));
    });
    this.quotas.replaceChildren(
      h('p', {class: 'muted', testid: 'quotas-anchor'},
        q.anchor ? `Up to ${formatTime(q.anchor)}, the last whole hour of data. The projection extends the trailing rate shown in the last column.` : 'No data yet.'),
      h('table', {class: 'table'},
        h('thead', {}, h('tr', {}, ['quota', 'period', 'GPU-hours', 'money', 'alerts', 'projection basis'].map((c) => h('th', {}, c)))),
        h('tbody', {}, rows)));
  }

  render({reply, period, quotas}, ctx) {
    this.renderQuotas(quotas);
    this.month.value = period;
    const lines = reply.lines || [];
    const viewer = ctx.info.role !== 'admin';
    this.kpis.replaceChildren(
      kpi(`Fleet cost, ${period}`, money(reply.total, 'cb-fleet-total'),
        `${formatTime(reply.period.from)} – ${formatTime(reply.period.to)}`, 'cb-fleet-total'),
      kpi('Lines', fig(formatCount(lines.length), lines.length, 'cb-count'), reply.share_idle ? 'idle capacity shared out' : 'idle capacity on its own lines', 'cb-count'));
    const unpriced = (reply.unpriced || []).map((u) => `${u.model} in ${u.pool}`).join(', ');
    this.note.textContent = [
      reply.share_idle
        ? 'Capacity held by no job is spread over the teams in proportion to their direct cost (the "shared idle" column).'
        : 'Capacity held by no job is on its own lines: (unallocated), (unavailable), (unmonitored).',
      viewer ? 'Your teams\' lines only; the fleet cost is the whole fleet\'s.' : 'The lines add up to the fleet cost.',
      unpriced ? `No price for ${unpriced}: that capacity costs 0.` : '',
    ].filter(Boolean).join(' ');
    this.table.setRows(lines);
  }
}
