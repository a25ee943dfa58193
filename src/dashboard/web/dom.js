// A few DOM helpers: element creation, figures that carry test ids, KPI tiles.
import {formatMoney, formatRatio, formatHours} from './format.js';

// h('div', {class: 'x', dataset: {testid: 'y'}, onclick: fn}, child, 'text', ...)
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'testid') el.dataset.testid = v;
    else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// A figure: its text, the raw API value in data-value (what the browser test compares),
// and an optional test id and title (the exact value behind a rounded one).
export function fig(text, value, testid, extra = {}) {
  return h('span', {
    class: 'fig',
    testid,
    'data-value': value === undefined || value === null ? '' : String(value),
    title: extra.title,
  }, text);
}

// A test id safe for any name: ids keep [A-Za-z0-9._-] and encode the rest.
export function tid(prefix, name) {
  return `${prefix}-${String(name).replace(/[^A-Za-z0-9._-]/g, (c) => `~${c.charCodeAt(0).toString(16)}`)}`;
}

// The price book's currency, from /api/v1/info (setCurrency on every refresh): an ISO
// 4217 code, an internal unit's name, or none (an unnamed unit, shown as the generic
// currency sign ¤ and said so in the header).
let currency = {name: null, label: 'unnamed unit'};

export function setCurrency(info) {
  currency = {name: info && info.currency ? info.currency : null,
    label: (info && info.currency_label) || 'unnamed unit'};
}

// "EUR", "GPU credits" or "unnamed unit": for headings and axis labels.
export function currencyLabel() {
  return currency.label;
}

// What follows an amount: "EUR", "GPU credits", or "¤" when no currency is set.
export function currencySymbol() {
  return currency.name || '¤';
}

// Money as given by the API (a decimal string), shown rounded to cents with its currency
// after it (unit: false leaves it to a column's heading); the exact amount is the title
// and the data-value of the figure.
export function money(text, testid, {unit = true} = {}) {
  const figure = fig(formatMoney(text), text, testid, {title: text});
  if (!unit) return figure;
  return h('span', {class: 'money'}, figure,
    h('span', {class: 'currency', title: currency.name ? undefined : 'unnamed unit: no currency is set ([prices] in gpuledger.toml)'},
      ` ${currencySymbol()}`));
}

export function ratio(r, testid) {
  return fig(formatRatio(r), r === null || r === undefined ? '' : r, testid);
}

export function hours(x, testid) {
  return fig(formatHours(x), x === null || x === undefined ? '' : x, testid);
}

export function kpi(label, valueNode, sub, testid) {
  return h('div', {class: 'kpi', testid: testid ? `${testid}-tile` : undefined},
    h('div', {class: 'kpi-label'}, label),
    h('div', {class: 'kpi-value'}, valueNode),
    sub ? h('div', {class: 'kpi-sub'}, sub) : null);
}

export function section(title, ...children) {
  return h('section', {class: 'panel'}, title ? h('h2', {}, title) : null, ...children);
}

export function notice(text, kind = 'info') {
  return h('p', {class: `notice notice-${kind}`}, text);
}

// A bar from 0 to 100% (values over 1 overflow in another color), for burn and shares.
export function bar(ratio, {target, over} = {}) {
  const pct = Math.max(0, Math.min(1, ratio || 0)) * 100;
  const cls = over !== undefined && ratio > over ? 'bar-fill bar-over' : 'bar-fill';
  const label = Number.isFinite(ratio) ? `${(ratio * 100).toFixed(0)}%` : 'no value';
  return h('span', {class: 'bar', role: 'img', 'aria-label': label},
    h('span', {class: cls, style: {width: `${pct}%`}}),
    target !== undefined && target !== null
      ? h('span', {class: 'bar-target', style: {left: `${Math.min(1, target) * 100}%`}}) : null);
}
