// Recommendations: right-sizing advice for the window with its evidence, confidence and
// saving, and the total saving: the sum of the net savings (summed exactly, from the decimal
// strings), where a job's advice compounds and never saves more than the job cost.
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
    this.table = new SortableTable('recommendations', [
      {key: 'kind', label: 'advice', sort: (r) => r.kind, cell: (r) => h('span', {class: `tag tag-${r.kind}`}, r.kind)},
      {key: 'job', label: 'job', sort: (r) => r.job, cell: (r) => jobLink(r.job)},
      {key: 'team', label: 'team', sort: (r) => r.team, cell: (r) => (r.team ? h('a', {href: teamHref(r.team)}, r.team) : '—')},
      {key: 'action', label: 'action', csv: (r) => r.action, cell: (r) => h('span', {}, r.action)},
      {key: 'evidence', label: 'evidence', csv: (r) => r.evidence, cell: (r) => h('span', {class: 'evidence'}, r.evidence)},
      {key: 'confidence', label: 'confidence', sort: (r) => CONFIDENCE_ORDER[r.confidence] || 0,
        cell: (r) => h('span', {class: `confidence confidence-${r.confidence}`}, r.confidence)},
      moneyColumn('cost', 'cost', (r) => r.cost, (r) => tid('rec-cost', `${r.kind}-${r.job}`)),
      // Savings alone compound within a job: their sum would overstate; the net column adds up.
      {...moneyColumn('saving', 'saving alone', (r) => r.saving, (r) => tid('rec-saving', `${r.kind}-${r.job}`)), total: null},
      moneyColumn('net_saving', 'net saving', (r) => r.net_saving, (r) => tid('rec-net-saving', `${r.kind}-${r.job}`)),
    ], {defaultSort: {key: 'saving', dir: -1}, rowTestId: (r) => tid('rec-row', `${r.kind}-${r.job}`), limit: 50});
    this.el = h('div', {class: 'page page-recommendations'}, h('h1', {}, 'Recommendations'), this.kpis,
      section(null, h('div', {class: 'filters'}, this.kind), this.table.el));
  }

  async load({win}) {
    return getJson('/api/v1/recommendations', {from: win.from, to: win.to});
  }

  render(reply, ctx) {
    this.recs = reply.recommendations || [];
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
