// Cost per experiment (/api/v1/experiments): a month's experiments per team, each with
// its cost, GPU-hours, waste and effective utilization, and each team's distribution
// (count, median, p90, the costliest) as the ledger computes it (docs/reports.md). A
// team's jobs without an experiment label are its "(none)" row. "Download CSV" asks the
// API for the same month as CSV (format=csv), so the file is the server's, to the
// micro-unit, not a copy of the page. Reached from the Chargeback page (the month's money
// per team and project), under whose navigation entry it sits.
import {getJson, getText} from './api.js';
import {h, kpi, section, notice, money, fig, tid, ratio} from './dom.js';
import {formatCount} from './format.js';
import {SortableTable, moneyColumn, hoursColumn, downloadCsv} from './table.js';
import {defaultMonth} from './page_money.js';

let experimentsMonth = '';

function teamTable(team) {
  const id = (e) => `${team.team}/${e.experiment}`;
  const table = new SortableTable(`experiments-${team.team}`, [
    {key: 'experiment', label: 'experiment', sort: (e) => e.experiment,
      cell: (e) => (e.labeled ? e.experiment : h('span', {class: 'muted'}, e.experiment))},
    hoursColumn('hours', 'GPU-hours', (e) => e.gpu_hours, (e) => tid('exp-hours', id(e))),
    {key: 'util', label: 'effective util.', num: true, sort: (e) => e.effective_utilization,
      cell: (e) => ratio(e.effective_utilization, tid('exp-util', id(e)))},
    moneyColumn('waste', 'waste', (e) => e.waste, (e) => tid('exp-waste', id(e))),
    moneyColumn('cost', 'cost', (e) => e.cost, (e) => tid('exp-cost', id(e)), {totalTestId: tid('exp-cost-total', team.team)}),
  ], {defaultSort: {key: 'cost', dir: -1}, rowTestId: (e) => tid('exp-row', id(e))});
  table.setRows(team.experiments || []);
  return table;
}

function distributionLine(team) {
  const d = team.distribution;
  if (!d.count) {
    return h('p', {class: 'muted', testid: tid('exp-dist', team.team)}, 'No labelled experiment: every job of the team is on the (none) row.');
  }
  return h('p', {testid: tid('exp-dist', team.team)},
    fig(`${formatCount(d.count)} ${d.count === 1 ? 'experiment' : 'experiments'}`, d.count, tid('exp-count', team.team)),
    ': median ', money(d.median, tid('exp-median', team.team)),
    ', p90 ', money(d.p90, tid('exp-p90', team.team)),
    ', costliest ', h('strong', {}, d.costliest.experiment), ' (', money(d.costliest.cost, tid('exp-costliest', team.team)), ')');
}

export class ExperimentsPage {
  constructor() {
    this.month = h('input', {type: 'month', testid: 'experiments-month', 'aria-label': 'month'});
    this.month.addEventListener('change', () => {
      experimentsMonth = this.month.value;
      window.gpuledgerApp.refresh();
    });
    this.download = h('button', {type: 'button', class: 'linklike', testid: 'experiments-download-csv',
      onclick: () => this.downloadCsv()}, 'Download CSV');
    this.kpis = h('div', {class: 'kpis'});
    this.note = h('div');
    this.teams = h('div', {testid: 'experiments-teams'});
    this.el = h('div', {class: 'page page-experiments'}, h('h1', {}, 'Experiments'),
      h('div', {class: 'filters'}, h('label', {}, 'month ', this.month), ' ', this.download),
      this.kpis, this.note, this.teams);
  }

  async load({info}) {
    const period = experimentsMonth || defaultMonth(info);
    return {reply: await getJson('/api/v1/experiments', {period, format: 'json'}), period};
  }

  async downloadCsv() {
    const period = this.month.value;
    try {
      const csv = await getText('/api/v1/experiments', {period, format: 'csv'});
      downloadCsv(`experiments-${period}.csv`, csv);
    } catch (e) {
      this.note.replaceChildren(notice(`The CSV could not be fetched: ${e.message}`, 'error'));
    }
  }

  render({reply, period}, ctx) {
    this.month.value = period;
    const teams = reply.teams || [];
    const count = teams.reduce((n, t) => n + t.distribution.count, 0);
    this.kpis.replaceChildren(
      kpi(`Experiments, ${period}`, fig(formatCount(count), count, 'experiments-count'),
        `labelled experiments of ${formatCount(teams.length)} ${teams.length === 1 ? 'team' : 'teams'}`, 'experiments-count'));
    const viewer = ctx.info.role !== 'admin';
    this.note.replaceChildren(h('p', {class: 'muted'},
      'Cost is what chargeback bills (active and allocated-idle time); waste is its allocated-idle part. ',
      'Median and p90 are nearest-rank over the team\'s labelled experiments. ',
      'A team\'s rows, its (none) row included, add up to its chargeback for the month.',
      viewer ? ' Your teams only.' : ''));
    this.teams.replaceChildren(...teams.map((t) => section(`Team ${t.team}`,
      h('p', {}, 'Team cost ', money(t.cost, tid('exp-team-cost', t.team)), ', of which waste ',
        money(t.waste, tid('exp-team-waste', t.team))),
      distributionLine(t), teamTable(t).el)));
    if (!teams.length) this.teams.replaceChildren(notice('No team\'s jobs held GPUs in this month.', 'info'));
  }
}
