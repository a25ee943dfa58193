// Recommendations: the advice for the window (docs/recommendations.md) with its evidence,
// confidence and saving, grouped by kind and team as the API lists it (the largest money
// first), the totals per kind, team and pool, and the total saving: the sum of the net
// savings (summed exactly, from the decimal strings), where a job's advice compounds and
// never saves more than the job cost.
import {getJson} from './api.js';
import {h, kpi, section, money, fig, tid} from './dom.js';
import {addMoney, parseMicros, formatCount} from './format.js';
import {SortableTable, moneyColumn} from './table.js';
import {jobLink, teamHref} from './page_jobs.js';

const CONFIDENCE_ORDER = {high: 3, medium: 2, low: 1};
let kindFilter = '';

export class RecommendationsPage {
  constructor() {
    this.kpis = h('div', {class: 'kpis'});
    this.kind = h('select', {testid: 'rec-filter-kind', 'aria-label': 'kind'});
    this.kind.addEventListener('change', () => {
      kindFilter = this.kind.value;
      this.apply();
    });
    this.groups = new SortableTable('recommendation-groups', [
      {key: 'kind', label: 'advice', sort: (g) => g.kind, cell: (g) => h('span', {class: `tag tag-${g.kind}`}, g.kind)},
      {key: 'team', label: 'team', sort: (g) => g.team, cell: (g) => (g.team ? h('a', {href: teamHref(g.team)}, g.team) : '—')},
      {key: 'count', label: 'pieces', num: true, sort: (g) => g.count, cell: (g) => formatCount(g.count)},
      moneyColumn('net_saving', 'net saving', (g) => g.net_saving, (g) => tid('rec-group-saving', `${g.kind}-${g.team}`)),
    ], {defaultSort: {key: 'net_saving', dir: -1}, rowTestId: (g) => tid('rec-group', `${g.kind}-${g.team}`), limit: 12});
    this.table = new SortableTable('recommendations', [
      // The API's order: group by group (kind and team, the largest money first).
      {key: 'rank', label: '#', num: true, sort: (r) => r.rank, cell: (r) => String(r.rank)},
      {key: 'kind', label: 'advice', sort: (r) => r.kind, cell: (r) => h('span', {class: `tag tag-${r.kind}`}, r.kind)},
      {key: 'job', label: 'job', sort: (r) => r.job, cell: (r) => jobLink(r.job)},
      {key: 'team', label: 'team', sort: (r) => r.team, cell: (r) => (r.team ? h('a', {href: teamHref(r.team)}, r.team) : '—')},
      {key: 'action', label: 'action', csv: (r) => r.action,
        cell: (r) => h('span', {}, r.action, r.remedies ? h('div', {class: 'evidence'}, `usual remedies: ${r.remedies}`) : null)},
      {key: 'evidence', label: 'evidence', csv: (r) => r.evidence, cell: (r) => h('span', {class: 'evidence'}, r.evidence)},
      {key: 'confidence', label: 'confidence', sort: (r) => CONFIDENCE_ORDER[r.confidence] || 0,
        cell: (r) => h('span', {class: `confidence confidence-${r.confidence}`}, r.confidence)},
      moneyColumn('cost', 'cost', (r) => r.cost, (r) => tid('rec-cost', `${r.kind}-${r.job}`)),
      // Savings alone compound within a job: their sum would overstate; the net column adds up.
      {...moneyColumn('saving', 'saving alone', (r) => r.saving, (r) => tid('rec-saving', `${r.kind}-${r.job}`)), total: null},
      moneyColumn('net_saving', 'net saving', (r) => r.net_saving, (r) => tid('rec-net-saving', `${r.kind}-${r.job}`)),
    ], {defaultSort: {key: 'rank', dir: 1}, rowTestId: (r) => tid('rec-row', `${r.kind}-${r.job}`), limit: 50});
    this.el = h('div', {class: 'page page-recommendations'}, h('h1', {}, 'Recommendations'), this.kpis,
      section('Where the money is, by kind and team', this.groups.el),
      section(null, h('div', {class: 'filters'}, this.kind), this.table.el));
  }

  async load({win}) {
    return getJson('/api/v1/recommendations', {from: win.from, to: win.to});
  }

  render(reply, ctx) {
    this.recs = (reply.recommendations || []).map((r, i) => ({...r, rank: i + 1}));
    this.groups.setRows(reply.groups || []);
    const kinds = [...new Set(this.recs.map((r) => r.kind))].sort();
    this.kind.replaceChildren(h('option', {value: ''}, 'all advice'), ...kinds.map((k) => h('option', {value: k}, k)));
    this.kind.value = kinds.includes(kindFilter) ? kindFilter : '';
    const total = addMoney(this.recs.map((r) => r.net_saving));
    const high = addMoney(this.recs.filter((r) => r.confidence === 'high').map((r) => r.net_saving));
    this.kpis.replaceChildren(
      kpi(`Total saving${ctx.currency ? ` (${ctx.currency})` : ''}`, money(total, 'rec-total-saving'), 'if every recommendation were followed, over the window; a job\'s advice compounds, so no job saves more than it cost', 'rec-total-saving'),
      kpi('High-confidence saving', money(high, 'rec-high-saving'), null, 'rec-high-saving'),
      kpi('Recommendations', fig(formatCount(this.recs.length), this.recs.length, 'rec-count'), null, 'rec-count'));
    this.apply();
  }

  apply() {
    this.table.setRows(this.recs.filter((r) => !kindFilter || r.kind === kindFilter));
  }
}
