// SLOs and actions (docs/objectives.md): each objective the config declares, judged as
// `gpuledger slo status` judges it (/api/v1/objectives): its attainment, error budget left,
// money at stake, the alerts firing and its burn rates hour by hour; then the interventions'
// audit log for the window (/api/v1/actions): what the rules took, proposed in dry-run,
// warned of or skipped, and the money per hour the stops free. A viewer sees its own
// teams' objectives and actions only (the API scopes them).
import {getJson, getAllActionPages} from './api.js';
import {h, kpi, section, notice, money, fig, tid} from './dom.js';
import {formatRatio, formatCount, formatTime, addMoney} from './format.js';
import {SortableTable, moneyColumn} from './table.js';
import {drawChart, constantSeries, PALETTE, TARGET_COLOR} from './charts.js';
import {jobLink, teamHref} from './page_jobs.js';

const OUTCOME_ORDER = {taken: 4, warned: 3, proposed: 2, skipped: 1};

function firingText(o) {
  const firing = (o.alerts || []).filter((a) => a.firing);
  if (!firing.length) return h('span', {class: 'muted'}, 'none');
  return h('span', {class: 'tag tag-firing'}, firing.map((a) => `${a.window} ${a.severity}`).join(', '));
}

// The window's decisions from all their pages, in order, with the pages' totals added up
// (counts, and money exactly as decimal strings).
function joinActionPages(pages) {
  const totals = pages.map((p) => p.totals || {});
  const count = (k) => totals.reduce((n, t) => n + (t[k] || 0), 0);
  const sum = (k) => addMoney(totals.map((t) => t[k]).filter((v) => v != null));
  return {
    ...pages[0],
    actions: pages.flatMap((p) => p.actions || []),
    totals: {taken: count('taken'), proposed: count('proposed'), warned: count('warned'),
             skipped: count('skipped'), freed_per_hour: sum('freed_per_hour'),
             proposed_per_hour: sum('proposed_per_hour')},
  };
}

export class SlosPage {
  constructor() {
    this.kpis = h('div', {class: 'kpis'});
    this.note = h('div');
    this.objectives = new SortableTable('objectives', [
      {key: 'name', label: 'objective', sort: (o) => o.name, cell: (o) => h('span', {title: o.source}, o.name)},
      {key: 'scope', label: 'scope', sort: (o) => o.scope, cell: (o) => o.scope},
      {key: 'target', label: 'target', num: true, sort: (o) => o.target,
        cell: (o) => fig(formatRatio(o.target, 0), o.target, tid('slo-target', o.name))},
      {key: 'value', label: 'attainment', num: true, sort: (o) => o.value,
        cell: (o) => fig(o.kind === 'budget' ? `${(o.value ?? 0).toFixed(2)}x pace` : formatRatio(o.value), o.value, tid('slo-value', o.name))},
      {key: 'budget_left', label: 'error budget left', num: true, sort: (o) => o.budget_left,
        cell: (o) => fig(formatRatio(o.budget_left), o.budget_left, tid('slo-budget-left', o.name))},
      moneyColumn('at_stake', 'at stake', (o) => o.at_stake, (o) => tid('slo-at-stake', o.name)),
      {key: 'firing', label: 'alerts firing', sort: (o) => (o.firing ? 1 : 0), csv: (o) => (o.alerts || []).filter((a) => a.firing).map((a) => a.window).join(' '),
        cell: (o) => h('span', {testid: tid('slo-firing', o.name)}, firingText(o))},
    ], {defaultSort: {key: 'budget_left', dir: 1}, rowTestId: (o) => tid('slo-row', o.name)});
    this.charts = h('div', {class: 'slo-charts'});
    this.actions = new SortableTable('actions', [
      {key: 'at', label: 'at', sort: (a) => a.at, cell: (a) => formatTime(a.at)},
      {key: 'rule', label: 'rule', sort: (a) => a.rule, cell: (a) => a.rule},
      {key: 'job', label: 'job', sort: (a) => a.job, cell: (a) => jobLink(a.job)},
      {key: 'team', label: 'team', sort: (a) => a.team, cell: (a) => (a.team ? h('a', {href: teamHref(a.team)}, a.team) : '—')},
      {key: 'action', label: 'action', sort: (a) => a.action, cell: (a) => a.action},
      {key: 'outcome', label: 'outcome', sort: (a) => OUTCOME_ORDER[a.outcome] || 0,
        cell: (a) => h('span', {class: `tag tag-${a.outcome}`, testid: tid('action-outcome', a.decision_id)}, a.outcome)},
      {key: 'mode', label: 'mode', sort: (a) => a.mode, cell: (a) => a.mode},
      {key: 'evidence', label: 'evidence, reason, result', csv: (a) => [a.evidence, a.reason, a.result].filter(Boolean).join('; '),
        cell: (a) => h('span', {class: 'evidence'}, [a.evidence, a.reason, a.result].filter(Boolean).join('; '))},
      moneyColumn('per_hour_freed', 'frees per hour', (a) => a.per_hour_freed, (a) => tid('action-freed', a.decision_id)),
    ], {defaultSort: {key: 'at', dir: -1}, rowTestId: (a) => tid('action-row', a.decision_id), limit: 50});
    this.el = h('div', {class: 'page page-slos'}, h('h1', {}, 'SLOs and actions'), this.kpis, this.note,
      section('Objectives', this.objectives.el),
      section('Burn rate over each alert\'s long window, hour by hour (1 = the error budget\'s pace)', this.charts),
      section('Interventions: taken, proposed (dry-run), warned, skipped', this.actions.el));
  }

  async load({win}) {
    const [objectives, pages] = await Promise.all([
      getJson('/api/v1/objectives', {history: '24h'}),
      getAllActionPages({from: win.from, to: win.to}),
    ]);
    return {objectives, actions: joinActionPages(pages)};
  }

  render({objectives, actions}, ctx) {
    const list = objectives.objectives || [];
    const t = actions.totals || {};
    const firing = list.filter((o) => o.firing).length;
    this.kpis.replaceChildren(
      kpi('Objectives met', fig(`${list.filter((o) => o.met).length} of ${list.length}`, list.filter((o) => o.met).length, 'slos-met'), null, 'slos-met'),
      kpi('Alerts firing', fig(formatCount(firing), firing, 'slos-firing'), 'objectives with a burn-rate alert firing now', 'slos-firing'),
      kpi(`Freed per hour${ctx.currency ? ` (${ctx.currency})` : ''}`, money(t.freed_per_hour, 'actions-freed'), `${formatCount(t.taken)} actions taken`, 'actions-freed'),
      kpi('Proposed (dry-run) per hour', money(t.proposed_per_hour, 'actions-proposed'), `${formatCount(t.proposed)} proposed, ${formatCount(t.warned)} warned, ${formatCount(t.skipped)} skipped`, 'actions-proposed'));
    this.note.replaceChildren(list.length ? '' : notice('No objectives to show: the config declares no [[objective]] (or none of your teams\').', 'info'));
    this.objectives.setRows(list);
    this.charts.replaceChildren();
    list.forEach((o, i) => {
      const hist = o.history || {};
      const times = (hist.times || []).map((x) => Date.parse(x) / 1000);
      if (!times.length) return;
      const holder = h('div', {class: 'chart', testid: tid('slo-chart', o.name)});
      this.charts.append(h('div', {class: 'slo-chart'}, h('h3', {}, o.name), holder));
      // Each alert's long-window burn rate, against 1: the pace that spends the error
      // budget exactly over the objective's window.
      const burns = Object.entries(hist.long_burn || {});
      drawChart(holder, {kind: 'line', times, height: 180, yFormat: 'hours', yLabel: 'burn rate (x budget pace)',
        series: [...burns.map(([w, v], k) => ({label: `burn ${w}`, values: v, color: PALETTE[(i + k) % PALETTE.length]})),
          {label: 'budget pace', values: constantSeries(times, 1), color: TARGET_COLOR, dash: true}]});
    });
    this.actions.setRows(actions.actions || []);
  }
}
