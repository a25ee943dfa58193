// A sortable table whose sort order outlives refreshes and page changes (kept per table
// name for the life of the tab), with a CSV download of its rows and a total row for
// them. The rows given to setRows are the filtered rows: the total and the CSV are of
// those (all of them, not only the ones shown). Columns:
//   {key, label, num: bool, sort: row => comparable, cell: row => Node|string, testid: row => id,
//    csv: row => string|number (default: sort's value; false: not in the CSV),
//    total: rows => Node|string (the column's figure in the total row)}
import {h, money, hours, currencyLabel} from './dom.js';
import {addMoney, parseMicros} from './format.js';

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
    this.tfoot = h('tfoot');
    this.footer = h('div', {class: 'table-footer'});
    this.download = h('button', {type: 'button', class: 'linklike csv-download', testid: `csv-${name}`,
      onclick: () => downloadCsv(`${name}.csv`, this.csv())}, 'Download CSV');
    this.el = h('div', {class: 'table-wrap'},
      h('table', {class: 'data', testid: `table-${name}`}, this.thead, this.tbody, this.tfoot),
      h('div', {class: 'table-tools'}, this.footer, this.download));
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
      }, c.label, active ? h('span', {class: 'sort-mark'}, s.dir > 0 ? ' ▲' : ' ▼') : null,
      // A money column's currency, on a line of its own under the label.
      c.money ? h('span', {class: 'th-unit'}, ` (${currencyLabel()})`) : null);
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
    this.renderHead();  // a money column's heading names the currency of this refresh
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
    this.renderTotal(rows);
    if (shown.length < rows.length) {
      this.footer.replaceChildren(`Showing ${shown.length} of ${rows.length}. `,
        h('button', {type: 'button', class: 'linklike', onclick: () => { this.showAll = true; this.renderBody(); }}, 'Show all'));
    } else {
      this.footer.replaceChildren(rows.length > 10 ? `${rows.length} rows` : '');
    }
  }
}

SortableTable.prototype.renderTotal = function renderTotal(rows) {
  if (!this.columns.some((c) => c.total)) {
    this.tfoot.replaceChildren();
    return;
  }
  const tr = h('tr', {class: 'total-row', testid: `total-${this.name}`});
  this.columns.forEach((c, i) => {
    let content = c.total ? c.total(rows) : '';
    if (i === 0 && !c.total) content = `total (${rows.length} ${rows.length === 1 ? 'row' : 'rows'})`;
    tr.append(h('td', {class: c.num ? 'num' : undefined}, content));
  });
  this.tfoot.replaceChildren(tr);
};

// The table's rows (all the filtered rows, in the shown order) as CSV: one header line of
// the column labels, then a line per row of the raw values (money as the API's decimal
// string, ratios 0..1), quoted where needed (RFC 4180).
SortableTable.prototype.csv = function csv() {
  const cols = this.columns.filter((c) => c.csv !== false && (c.csv || c.sort));
  const lines = [cols.map((c) => csvField(headingOf(c))).join(',')];
  for (const r of this.sorted()) lines.push(cols.map((c) => csvField((c.csv || c.sort)(r))).join(','));
  return lines.join('\r\n') + '\r\n';
};

export function csvField(v) {
  if (v === null || v === undefined) return '';
  const s = typeof v === 'bigint' ? v.toString() : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

// Hands `text` to the browser as the download `filename`.
export function downloadCsv(filename, text) {
  const url = URL.createObjectURL(new Blob([text], {type: 'text/csv'}));
  const a = h('a', {href: url, download: filename});
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// A column's heading (and CSV header): a money column's (money: true, as moneyColumn's)
// names the currency, "cost (EUR)".
function headingOf(c) {
  return c.money ? `${c.label} (${currencyLabel()})` : c.label;
}

// A money column: sorted exactly, the API's decimal string in the CSV, summed exactly in
// the total row, the currency in its heading. get(row) -> decimal string or null;
// testid(row) -> the figure's id.
export function moneyColumn(key, label, get, testid, {totalTestId} = {}) {
  return {
    key, label, num: true, money: true,
    sort: (r) => (get(r) === null || get(r) === undefined ? null : parseMicros(get(r))),
    cell: (r) => (get(r) === null || get(r) === undefined ? '—' : money(get(r), testid ? testid(r) : undefined, {unit: false})),
    csv: (r) => get(r),
    total: (rows) => money(addMoney(rows.map(get).filter((v) => v !== null && v !== undefined)), totalTestId, {unit: false}),
  };
}

// A GPU-hours column, summed in the total row.
export function hoursColumn(key, label, get, testid, {totalTestId} = {}) {
  return {
    key, label, num: true,
    sort: (r) => get(r),
    cell: (r) => (get(r) === null || get(r) === undefined ? '—' : hours(get(r), testid ? testid(r) : undefined)),
    total: (rows) => hours(rows.reduce((a, r) => a + (get(r) || 0), 0), totalTestId),
  };
}
