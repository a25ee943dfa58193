// Teams: cost, effective utilization, allocated efficiency and budget burn per team; and
// one team's page (its series, its projects, its jobs).
import {getOptional, getAllJobs, getUsage, getOptionalSeries} from './api.js';
import {h, kpi, section, notice, money, ratio, hours, fig, tid, bar} from './dom.js';
import {formatRatio, parseMicros} from './format.js';
import {SortableTable, moneyColumn, hoursColumn} from './table.js';
import {drawChart, UTIL_COLOR} from './charts.js';
import {JobsTable, teamHref} from './page_jobs.js';
import {bucketLayers, utilizationSpec, bucketTable} from './page_fleet.js';

function budgetCells(b, team) {
  if (!b) return {budget: '—', burn: h('span', {class: 'muted'}, 'no budget'), projected: '—'};
  return {
    budget: money(b.budget, tid('team-budget', team), {unit: false}),
    burn: h('span', {class: 'burn'},
      bar(b.burn, {over: 1}),
      ' ', fig(formatRatio(b.burn, 0), b.burn, tid('team-burn', team)),
      ' of ', money(b.spent, tid('team-spent', team), {unit: false})),
    projected: money(b.projected, tid('team-projected', team), {unit: false}),
  };
}

export class TeamsPage {
  constructor() {
    this.note = h('div');
    this.budgetNote = h('p', {class: 'muted'});
    this.table = new SortableTable('teams', [
      {key: 'team', label: 'team', sort: (r) => r.team,
        cell: (r) => (r.row.no_job ? h('span', {class: 'muted'}, 'capacity held by no job') : h('a', {href: teamHref(r.team), testid: tid('team-link', r.team)}, r.team))},
      hoursColumn('hours', 'GPU-hours', (r) => r.row.gpu_hours, (r) => tid('team-hours', r.team), {totalTestId: 'teams-hours-total'}),
      {key: 'eff', label: 'eff. util', num: true, sort: (r) => r.row.effective_utilization, cell: (r) => ratio(r.row.effective_utilization, tid('team-eff', r.team))},
      {key: 'alloc', label: 'alloc. eff', num: true, sort: (r) => r.row.allocated_efficiency, cell: (r) => ratio(r.row.allocated_efficiency, tid('team-alloc-eff', r.team))},
      moneyColumn('idle', 'idle cost', (r) => r.row.buckets.allocated_idle.cost, (r) => tid('team-idle-cost', r.team), {totalTestId: 'teams-idle-cost-total'}),
      moneyColumn('cost', 'cost', (r) => r.row.cost, (r) => tid('team-cost', r.team), {totalTestId: 'teams-cost-total'}),
      // Money columns (money: true): the currency is in the heading, not in each cell.
      {key: 'budget', label: 'monthly budget', num: true, money: true, sort: (r) => (r.budget ? parseMicros(r.budget.budget) : null),
        csv: (r) => (r.budget ? r.budget.budget : ''), cell: (r) => budgetCells(r.budget, r.team).budget},
      {key: 'burn', label: 'month to date', money: true, sort: (r) => (r.budget ? r.budget.burn : null), csv: (r) => (r.budget ? r.budget.spent : ''), cell: (r) => budgetCells(r.budget, r.team).burn},
      {key: 'projected', label: 'projected', num: true, money: true, sort: (r) => (r.budget ? parseMicros(r.budget.projected) : null),
        csv: (r) => (r.budget ? r.budget.projected : ''), cell: (r) => budgetCells(r.budget, r.team).projected},
    ], {
      defaultSort: {key: 'cost', dir: -1},
      rowTestId: (r) => tid('team-row', r.team),
      rowHref: (r) => (r.row.no_job ? null : teamHref(r.team)),
    });
    this.el = h('div', {class: 'page page-teams'}, h('h1', {}, 'Teams'), this.note,
      section(null, this.table.el, this.budgetNote,
        h('p', {class: 'muted', testid: 'teams-eff-note'},
          '“eff. util” is active time over capacity; “alloc. eff” is active time over the time held by jobs. ',
          'A team\'s capacity is exactly what its jobs held, so the two are equal on every team row; they differ for ',
          'pools and the fleet (Fleet page), where unallocated, unavailable and unmonitored time count as capacity.')));
  }

  async load({win}) {
    const [usage, budgets] = await Promise.all([
      getUsage({from: win.from, to: win.to, by: 'team'}),
      getOptional('/api/v1/budgets'),
    ]);
    return {usage, budgets};
  }

  render({usage, budgets}) {
    const byTeam = new Map(((budgets && budgets.teams) || []).map((b) => [b.team, b]));
    this.table.setRows((usage.rows || []).map((row) => ({team: row.group.team, row, budget: byTeam.get(row.group.team) || null})));
    this.budgetNote.textContent = budgets
      ? `Budgets are per calendar month: ${budgets.period}, ${formatRatio(budgets.elapsed, 0)} of it gone; “projected” is the month's spend at this pace. Costs in the other columns are for the window.`
      : 'This server reports no budgets.';
  }
}

export class TeamPage {
  constructor(team) {
    this.team = team;
    this.kpis = h('div', {class: 'kpis'});
    this.utilChart = h('div', {class: 'chart', testid: 'chart-team-utilization'});
    this.bucketChart = h('div', {class: 'chart', testid: 'chart-team-buckets'});
    this.buckets = h('div');
    this.projects = new SortableTable('team-projects', [
      {key: 'project', label: 'project', sort: (r) => r.group.project, cell: (r) => r.group.project},
      hoursColumn('hours', 'GPU-hours', (r) => r.gpu_hours, (r) => tid('project-hours', r.group.project)),
      {key: 'eff', label: 'eff. util', num: true, sort: (r) => r.effective_utilization, cell: (r) => ratio(r.effective_utilization, tid('project-eff', r.group.project))},
      moneyColumn('idle', 'idle cost', (r) => r.buckets.allocated_idle.cost, (r) => tid('project-idle-cost', r.group.project)),
      moneyColumn('cost', 'cost', (r) => r.cost, (r) => tid('project-cost', r.group.project)),
    ], {defaultSort: {key: 'cost', dir: -1}, rowTestId: (r) => tid('project-row', r.group.project)});
    this.jobs = new JobsTable('team-jobs', {showTeamFilter: false, limit: 50});
    this.missing = h('div', {hidden: true});
    this.body = h('div', {},
      this.kpis,
      section('Effective utilization over time', this.utilChart),
      section('GPU-hours held, by bucket', this.bucketChart, this.buckets),
      section('Projects', this.projects.el),
      section('Jobs', this.jobs.el));
    this.el = h('div', {class: 'page page-team'},
      h('p', {class: 'crumbs'}, h('a', {href: '#/teams'}, 'Teams'), ' / ', h('span', {testid: 'team-name'}, team)),
      h('h1', {}, `Team ${team}`), this.missing, this.body);
  }

  async load({win}) {
    const w = {from: win.from, to: win.to};
    const [usage, projects, series, jobs, byJob, budgets] = await Promise.all([
      getUsage({...w, by: 'team'}),
      getUsage({...w, by: 'team,project'}),
      getOptionalSeries({...w, by: 'team'}),
      getAllJobs(),
      getUsage({...w, by: 'job'}),
      getOptional('/api/v1/budgets'),
    ]);
    return {usage, projects, series, jobs, byJob, budgets};
  }

  render(data, ctx) {
    const team = this.team;
    const row = (data.usage.rows || []).find((r) => r.group.team === team);
    this.missing.hidden = !!row;
    this.body.hidden = !row;
    if (!row) {
      this.missing.replaceChildren(notice(`No usage for team ${team} in this window (or not a team this token may see).`, 'warn'));
      return;
    }
    const budget = ((data.budgets && data.budgets.teams) || []).find((b) => b.team === team);
    const burnTile = budget
      ? kpi('Budget burn (month to date)', fig(formatRatio(budget.burn, 0), budget.burn, 'team-kpi-burn'),
        h('span', {}, bar(budget.burn, {over: 1}), ' spent ', money(budget.spent, 'team-kpi-spent'), ' of ',
          money(budget.budget, 'team-kpi-budget'), '; projected ', money(budget.projected, 'team-kpi-projected')), 'team-kpi-burn')
      : kpi('Budget burn', h('span', {class: 'muted'}, '—'), 'no budget configured', 'team-kpi-burn');
    this.kpis.replaceChildren(
      kpi('Cost', money(row.cost, 'team-kpi-cost'), 'in the window', 'team-kpi-cost'),
      kpi('GPU-hours', hours(row.gpu_hours, 'team-kpi-hours'), 'held by its jobs', 'team-kpi-hours'),
      kpi('Effective utilization', ratio(row.effective_utilization, 'team-kpi-eff'), null, 'team-kpi-eff'),
      kpi('Allocated efficiency', ratio(row.allocated_efficiency, 'team-kpi-alloc-eff'), 'active / held', 'team-kpi-alloc-eff'),
      burnTile);
    const g = data.series ? data.series.groups.find((x) => x.key[0] === team) : null;
    if (g) {
      drawChart(this.utilChart, utilizationSpec(data.series.times, [{label: team, color: UTIL_COLOR, values: g.effective_utilization}],
        ctx.info.targets ? ctx.info.targets.fleet : null, 240));
      drawChart(this.bucketChart, {kind: 'stack', times: data.series.times,
        series: bucketLayers(g, 'hours').filter((l) => l.values.some((v) => v > 0)), yFormat: 'hours', height: 220});
    } else {
      this.utilChart.replaceChildren(notice('No hourly series for this team.', 'info'));
    }
    this.buckets.replaceChildren(bucketTable(row, 'team-bucket'));
    this.projects.setRows((data.projects.rows || []).filter((r) => r.group.team === team));
    this.jobs.setData((data.jobs.jobs || []).filter((j) => j.team === team), data.byJob);
  }
}
