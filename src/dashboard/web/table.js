// A sortable table whose sort order outlives refreshes and page changes (kept per table
// name for the life of the tab). Columns:
//   {key, label, num: bool, sort: row => comparable, cell: row => Node|string, testid: row => id}
import {h} from './dom.js';

const sortState = new Map();

export class SortableTable {
  // name: the key of the kept sort state; defaultSort: {key, dir: 1|-1}.
  constructor(name, columns, {defaultSort, rowTestId, rowHref, limit} = {}) {
    this.name = name;
    this.columns = columns;
    this.rowTestId = rowTestId;
    this.rowHref = rowHref;
    this.limit = limit || 0;
    this.showAll = false;
    if (!sortState.has(name)) sortState.set(name, defaultSort || {key: columns[0].key, dir: 1});
    this.thead = h('thead');
    this.tbody = h('tbody');
    this.footer = h('div', {class: 'table-footer'});
    this.el = h('div', {class: 'table-wrap'}, h('table', {class: 'data', testid: `table-${name}`}, this.thead, this.tbody), this.footer);
    this.rows = [];
    this.renderHead();
  }

  get sort() {
    return sortState.get(this.name);
  }

  renderHead() {
    const s = this.sort;
    const tr = h('tr');
    for (const c of this.columns) {
      const active = s.key === c.key;
      const th = h('th', {
        class: `${c.num ? 'num' : ''} ${c.sort ? 'sortable' : ''} ${active ? 'sorted' : ''}`.trim(),
        scope: 'col',
        'aria-sort': active ? (s.dir > 0 ? 'ascending' : 'descending') : undefined,
        testid: `sort-${this.name}-${c.key}`,
      }, c.label, active ? h('span', {class: 'sort-mark'}, s.dir > 0 ? ' ▲' : ' ▼') : null);
      if (c.sort) {
        th.addEventListener('click', () => {
          const cur = this.sort;
          sortState.set(this.name, cur.key === c.key ? {key: c.key, dir: -cur.dir} : {key: c.key, dir: c.num ? -1 : 1});
          this.renderHead();
          this.renderBody();
        });
      }
      tr.append(th);
    }
    this.thead.replaceChildren(tr);
  }

  setRows(rows) {
    this.rows = rows;
    this.renderBody();
  }

  sorted() {
    const s = this.sort;
    const col = this.columns.find((c) => c.key === s.key);
    if (!col || !col.sort) return this.rows;
    const keyed = this.rows.map((r) => [col.sort(r), r]);
    keyed.sort((a, b) => {
      const x = a[0];
      const y = b[0];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      if (typeof x === 'bigint' || typeof x === 'number') return (x < y ? -1 : 1) * s.dir;
      return String(x).localeCompare(String(y), undefined, {numeric: true}) * s.dir;
    });
    return keyed.map((k) => k[1]);
  }

  renderBody() {
    const rows = this.sorted();
    const shown = this.limit && !this.showAll ? rows.slice(0, this.limit) : rows;
    const frag = document.createDocumentFragment();
    for (const r of shown) {
      const tr = h('tr', {testid: this.rowTestId ? this.rowTestId(r) : undefined});
      const href = this.rowHref ? this.rowHref(r) : null;
      if (href) {
        tr.classList.add('link-row');
        tr.addEventListener('click', (e) => {
          if (e.target.closest('a')) return;
          location.hash = href;
        });
      }
      for (const c of this.columns) {
        const content = c.cell(r);
        tr.append(h('td', {class: c.num ? 'num' : undefined, testid: c.testid ? c.testid(r) : undefined}, content));
      }
      frag.append(tr);
    }
    if (shown.length === 0) {
      frag.append(h('tr', {}, h('td', {colspan: String(this.columns.length), class: 'empty'}, 'Nothing to show.')));
    }
    this.tbody.replaceChildren(frag);
    if (shown.length < rows.length) {
      this.footer.replaceChildren(`Showing ${shown.length} of ${rows.length}. `,
        h('button', {type: 'button', class: 'linklike', onclick: () => { this.showAll = true; this.renderBody(); }}, 'Show all'));
    } else {
      this.footer.replaceChildren(rows.length > 10 ? `${rows.length} rows` : '');
    }
  }
}
