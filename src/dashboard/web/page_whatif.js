// What-if on the ledger's own history (/api/v1/whatif, admins only): the last N days of
// recorded jobs replayed with separate or merged pools, MIG slices, other policies and a
// smaller or larger fleet, as `gpuledger whatif` answers them. One panel per question:
// the scenarios side by side in money, utilization and waiting, what changes, and the
// assumptions each answer rests on. N is the dashboard's window in whole days (1..30).
import {getJson} from './api.js';
import {h, kpi, section, notice, money, ratio, fig, tid} from './dom.js';
import {formatCount, formatDuration, formatHours, formatRatio, formatTime} from './format.js';

export const MAX_WHATIF_DAYS = 30;

// The window's length in whole days, within the API's 1..30.
export function whatIfDays(win) {
  const days = Math.ceil((Date.parse(win.to) - Date.parse(win.from)) / 86400000);
  return Math.max(1, Math.min(MAX_WHATIF_DAYS, Number.isFinite(days) ? days : 14));
}

// "66.7% of requested GPUs started within 10m, target 95%: MISSED" (the CLI's words).
export function sloText(s) {
  const wait = formatDuration((s.slo_wait_seconds || 0) * 1000);
  return `${formatRatio(s.slo_granted_ratio)} within ${wait}, target ${formatRatio(s.slo_target_ratio, 0)}: ${s.slo_met ? 'met' : 'MISSED'}`;
}

const ROWS = [
  ['gpus', 'GPUs', (s, id) => fig(formatCount(s.gpus), s.gpus, id)],
  ['fleet_cost', 'fleet cost', (s, id) => money(s.fleet_cost, id)],
  ['allocated_cost', 'allocated cost', (s, id) => money(s.allocated_cost, id)],
  ['allocated_gpu_hours', 'allocated GPU-hours', (s, id) => fig(formatHours(s.allocated_gpu_hours), s.allocated_gpu_hours, id)],
  ['allocated_ratio', 'allocated utilization', (s, id) => ratio(s.allocated_ratio, id)],
  ['active_ratio', 'active utilization', (s, id) => ratio(s.active_ratio, id)],
  ['wait_mean_seconds', 'wait, mean', (s, id) => fig(formatDuration(s.wait_mean_seconds * 1000), s.wait_mean_seconds, id)],
  ['wait_p95_seconds', 'wait, p95', (s, id) => fig(formatDuration(s.wait_p95_seconds * 1000), s.wait_p95_seconds, id)],
  ['slo', 'availability SLO', (s, id) => h('span', {class: s.slo_met ? 'good' : 'bad'}, fig(sloText(s), s.slo_granted_ratio, id))],
  ['completed', 'jobs completed', (s, id) => fig(`${formatCount(s.completed)} / ${formatCount(s.jobs)}`, s.completed, id)],
];

function answerPanel(a) {
  const head = h('tr', {}, h('th', {scope: 'col'}, ''),
    ...a.scenarios.map((s, i) => h('th', {scope: 'col', class: 'num'}, s.label)));
  const body = ROWS.map(([key, label, cell]) => h('tr', {},
    h('th', {scope: 'row'}, label),
    ...a.scenarios.map((s, i) => h('td', {class: 'num'}, cell(s, tid(`whatif-${a.question}-${i}`, key))))));
  return section(a.title,
    h('div', {class: 'table-wrap'}, h('table', {class: 'data whatif', testid: `whatif-${a.question}`}, h('thead', {}, head), h('tbody', {}, ...body))),
    a.findings.length ? h('ul', {class: 'findings', testid: `whatif-${a.question}-findings`}, ...a.findings.map((f) => h('li', {}, f))) : null,
    a.assumptions.length ? h('p', {class: 'muted'}, 'Assuming ', a.assumptions.join('; '), '.') : null);
}

export class WhatIfPage {
  constructor() {
    this.kpis = h('div', {class: 'kpis'});
    this.note = h('div');
    this.answers = h('div');
    this.assumptions = h('div');
    this.el = h('div', {class: 'page page-whatif'}, h('h1', {}, 'What-if'), this.note, this.kpis, this.answers,
      section('Assumptions of every answer', this.assumptions));
  }

  async load({win, info}) {
    if (info.role !== 'admin') return {forbidden: true};
    const days = whatIfDays(win);
    return {days, reply: await getJson('/api/v1/whatif', {days})};
  }

  render(data) {
    if (data.forbidden) {
      this.note.replaceChildren(notice('The what-if replays every team\'s jobs: only an admin token sees it.', 'info'));
      this.kpis.replaceChildren();
      this.answers.replaceChildren();
      this.assumptions.replaceChildren();
      return;
    }
    const {days, reply} = data;
    const base = (reply.answers[0] && reply.answers[0].scenarios[0]) || null;
    this.note.replaceChildren(h('p', {class: 'muted'},
      `The last ${days} ${days === 1 ? 'day' : 'days'} of the ledger's recorded jobs (${formatTime(reply.window.begin)} – ${formatTime(reply.window.end)}), `,
      'replayed by the simulator with what they asked for, how long they really ran and the activity they really had; ',
      'each panel changes one thing and keeps the rest as recorded. The same answer as ',
      h('code', {}, `gpuledger whatif --window ${days}d`), '.'));
    this.kpis.replaceChildren(
      kpi('Jobs replayed', fig(formatCount(reply.jobs), reply.jobs, 'whatif-jobs'),
        reply.left_out ? `${formatCount(reply.left_out)} left out (no start, end or request recorded)` : 'every recorded job', 'whatif-jobs'),
      ...(base ? [
        kpi('Fleet cost as run', money(base.fleet_cost, 'whatif-base-fleet-cost'), `${formatCount(base.gpus)} GPUs over the window`, 'whatif-base-fleet-cost'),
        kpi('Allocated utilization as run', ratio(base.allocated_ratio, 'whatif-base-allocated'),
          base.active_ratio !== null ? `active ${formatRatio(base.active_ratio)}` : 'no activity recorded', 'whatif-base-allocated'),
        kpi('Wait as run (mean)', fig(formatDuration(base.wait_mean_seconds * 1000), base.wait_mean_seconds, 'whatif-base-wait'),
          sloText(base), 'whatif-base-wait')] : []));
    this.answers.replaceChildren(...reply.answers.map(answerPanel));
    this.assumptions.replaceChildren(h('ul', {testid: 'whatif-assumptions'}, ...reply.assumptions.map((s) => h('li', {}, s))));
  }
}
