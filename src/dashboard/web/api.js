// The dashboard's view of the server's JSON API: the bearer token (kept in
// sessionStorage, so it ends with the tab), requests, errors, and the window every
// windowed request of a page shares.

const TOKEN_KEY = 'gpuledger.token';
const HOUR_MS = 3600 * 1000;

export class ApiError extends Error {
  constructor(status, code, message, path) {
    super(`${path}: ${status} ${message || code || ''}`.trim());
    this.status = status;
    this.code = code;
    this.path = path;
  }
}

let memoryToken = '';

export function getToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

export function setToken(token) {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage refused (private mode): the token lasts until the page is reloaded.
  }
  memoryToken = token || '';
}

// GET `path` with `params` (empty ones left out) and the token: the response and its text.
async function request(path, params, accept) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') query.set(k, v);
  }
  const qs = query.toString();
  const url = qs ? `${path}?${qs}` : path;
  const headers = accept ? {Accept: accept} : {};
  const token = getToken() || memoryToken;
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(url, {headers, cache: 'no-store'});
  return {res, text: await res.text()};
}

// GET a JSON endpoint. Resolves to the parsed body; rejects with ApiError for any
// non-2xx answer (401: no or wrong token; 404: unknown or not this token's).
export async function getJson(path, params = {}) {
  const {res, text} = await request(path, params, 'application/json');
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!res.ok) {
    throw new ApiError(res.status, body && body.error, body && body.message, path);
  }
  return body;
}

// GET an endpoint's body as text (a CSV the API renders); rejects with ApiError for any
// non-2xx answer.
export async function getText(path, params = {}) {
  const {res, text} = await request(path, params, null);
  if (!res.ok) throw new ApiError(res.status, null, text, path);
  return text;
}

// `promise`'s answer, or null when the server does not have the endpoint (404 from an
// older server); other errors still reject.
async function nullIfMissing(promise) {
  try {
    return await promise;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
}

// The same request, answering null instead of rejecting when the server does not have
// the endpoint (404 from an older server); other errors still reject.
export function getOptional(path, params) {
  return nullIfMissing(getJson(path, params));
}

// Every job the token may see: /api/v1/jobs answers a page at a time (`next`).
export async function getAllJobs() {
  const jobs = [];
  let after = null;
  do {
    const page = await getJson('/api/v1/jobs', {after});
    jobs.push(...(page.jobs || []));
    after = page.next || null;
  } while (after);
  return {jobs};
}

// Every page of a paged endpoint (`path`: /api/v1/actions, /usage, /series) for `params`,
// in order: each answers at most `limit` items a page, with `next` for the rest (null on
// the last). /usage and /series refuse a page of an answer that changed since its first
// page (409: data arrived inside the window meanwhile): the read starts again, a few times.
// `pageSize`: the items asked for a page (the server's most by default).
export async function getAllPages(path, params, pageSize = 5000) {
  for (let attempt = 0; ; attempt++) {
    try {
      const pages = [];
      let after = null;
      do {
        const page = await getJson(path, {...params, limit: pageSize, after});
        pages.push(page);
        after = page.next || null;
      } while (after);
      return pages;
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 409) || attempt >= 2) throw e;
    }
  }
}

// Every page of /api/v1/actions: each page's totals are of that page only.
export function getAllActionPages(params) {
  return getAllPages('/api/v1/actions', params);
}

// One answer of every page of `path`: the last page's fields (every page carries the
// whole answer's total), with the `list` of every page in order.
async function getWhole(path, params, list, pageSize) {
  const pages = await getAllPages(path, params, pageSize);
  const whole = {...pages[pages.length - 1]};
  whole[list] = pages.flatMap((p) => p[list] || []);
  return whole;
}

// /api/v1/usage, every row of the answer (it answers a page of rows at a time).
export function getUsage(params, pageSize) {
  return getWhole('/api/v1/usage', params, 'rows', pageSize);
}

// /api/v1/series, every group of the answer, or null when the server does not have the
// endpoint (404 from an older server).
export function getOptionalSeries(params, pageSize) {
  return nullIfMissing(getWhole('/api/v1/series', params, 'groups', pageSize));
}

export function jobPath(id) {
  return `/api/v1/jobs/${encodeURIComponent(id)}`;
}

export const SPANS = {'24h': 24, '7d': 7 * 24, '30d': 30 * 24};
// Every window the picker offers: trailing spans, calendar ranges, and a custom one.
export const RANGES = [
  ['24h', 'last 24 h'], ['7d', 'last 7 days'], ['30d', 'last 30 days'],
  ['last-week', 'last week'], ['this-month', 'this month'], ['last-month', 'last month'], ['custom', 'custom…'],
];
const DAY_MS = 24 * HOUR_MS;

function iso(ms) {
  return new Date(ms).toISOString().replace('.000Z', 'Z');
}

// The Monday 00:00 UTC of the ISO week holding `ms`.
function mondayOf(ms) {
  const day = Math.floor(ms / DAY_MS);
  const weekday = (day + 3) % 7;  // 1970-01-01 was a Thursday: 0 = Monday
  return (day - weekday) * DAY_MS;
}

function monthStart(ms, back = 0) {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - back, 1);
}

// "2026-11-03" or an RFC 3339 time -> epoch ms (a date is its 00:00 UTC); NaN otherwise.
export function parseDay(text) {
  if (typeof text !== 'string' || !text) return NaN;
  return /^\d{4}-\d{2}-\d{2}$/.test(text) ? Date.parse(`${text}T00:00:00Z`) : Date.parse(text);
}

// The window a page shows. Trailing spans ('24h', '7d', '30d') end at the default end,
// which is now, or the end of the recorded data rounded up to the hour when the data
// ended earlier (a store generated some time ago); when the data begin inside the span,
// the window begins with them (at the hour), so the charts are not mostly empty (the
// figures are the same either way: there is no capacity before the first sample).
// Calendar ranges are taken relative to that end: 'last-week' is the ISO week before the
// one it falls in, 'this-month' runs from the 1st to it, 'last-month' is the month
// before. 'custom' is custom.from .. custom.to (days, `to` included, or RFC 3339 times).
// Returns {span, from, to} (RFC 3339), fromMs, toMs and `clipped` (begins with the data).
export function windowFor(info, span, custom = {}) {
  const nowMs = Date.parse(info.now);
  let endMs = nowMs;
  const dataTo = info.data && info.data.to ? Date.parse(info.data.to) : NaN;
  if (Number.isFinite(dataTo)) {
    const rounded = Math.ceil(dataTo / HOUR_MS) * HOUR_MS;
    endMs = Math.min(nowMs, rounded);
  }
  let fromMs;
  let toMs = endMs;
  let trailing = false;
  if (span === 'last-week') {
    toMs = mondayOf(endMs - 1);
    fromMs = toMs - 7 * DAY_MS;
  } else if (span === 'this-month') {
    fromMs = monthStart(endMs - 1);
  } else if (span === 'last-month') {
    toMs = monthStart(endMs - 1);
    fromMs = monthStart(endMs - 1, 1);
  } else if (span === 'custom' && Number.isFinite(parseDay(custom.from)) && Number.isFinite(parseDay(custom.to))) {
    fromMs = parseDay(custom.from);
    toMs = parseDay(custom.to) + (/^\d{4}-\d{2}-\d{2}$/.test(custom.to) ? DAY_MS : 0);
  } else {
    if (!SPANS[span]) span = '7d';
    trailing = true;
    fromMs = endMs - SPANS[span] * HOUR_MS;
  }
  let clipped = false;
  const dataFrom = info.data && info.data.from ? Date.parse(info.data.from) : NaN;
  if (trailing && Number.isFinite(dataFrom)) {
    const floored = Math.floor(dataFrom / HOUR_MS) * HOUR_MS;
    if (floored > fromMs && floored < endMs) {
      fromMs = floored;
      clipped = true;
    }
  }
  return {span, fromMs, toMs, from: iso(fromMs), to: iso(toMs), clipped};
}

// /api/v1/info, or what the older endpoints can say in its place: the fleet's clock and
// last sample, the teams with usage rows, the default target.
export async function loadInfo() {
  const info = await getOptional('/api/v1/info');
  if (info) return info;
  const fleet = await getJson('/api/v1/fleet');
  let last = null;
  for (const d of fleet.devices || []) {
    if (d.last_sample && (!last || d.last_sample > last)) last = d.last_sample;
  }
  const usage = await getUsage({window: '30d', by: 'team'});
  const teams = (usage.rows || []).filter((r) => !r.no_job).map((r) => r.group.team).filter((t) => t);
  return {
    now: fleet.now,
    role: null,
    teams,
    data: {from: null, to: last},
    targets: {fleet: 0.6, pools: {}},
    budgets: {},
    currency: null,
    refresh_seconds: 30,
    fallback: true,
  };
}
