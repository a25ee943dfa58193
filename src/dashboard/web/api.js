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

// GET a JSON endpoint. Resolves to the parsed body; rejects with ApiError for any
// non-2xx answer (401: no or wrong token; 404: unknown or not this token's).
export async function getJson(path, params = {}) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') query.set(k, v);
  }
  const qs = query.toString();
  const url = qs ? `${path}?${qs}` : path;
  const headers = {Accept: 'application/json'};
  const token = getToken() || memoryToken;
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(url, {headers, cache: 'no-store'});
  const text = await res.text();
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

// The same request, answering null instead of rejecting when the server does not have
// the endpoint (404 from an older server); other errors still reject.
export async function getOptional(path, params) {
  try {
    return await getJson(path, params);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
}

export function jobPath(id) {
  return `/api/v1/jobs/${encodeURIComponent(id)}`;
}

export const SPANS = {'24h': 24, '7d': 7 * 24, '30d': 30 * 24};

// The window a page shows: `span` hours ending at the default end, which is now, or
// the end of the recorded data rounded up to the hour when the data ended earlier (a
// store generated some time ago). When the data begin inside the span, the window
// begins with them (at the hour), so the charts are not mostly empty; the figures are
// the same either way, as there is no capacity before the first sample. Returns
// {span, from, to} (RFC 3339) and fromMs, toMs.
export function windowFor(info, span) {
  const nowMs = Date.parse(info.now);
  let endMs = nowMs;
  const dataTo = info.data && info.data.to ? Date.parse(info.data.to) : NaN;
  if (Number.isFinite(dataTo)) {
    const rounded = Math.ceil(dataTo / HOUR_MS) * HOUR_MS;
    endMs = Math.min(nowMs, rounded);
  }
  const hours = SPANS[span] || SPANS['7d'];
  let fromMs = endMs - hours * HOUR_MS;
  const dataFrom = info.data && info.data.from ? Date.parse(info.data.from) : NaN;
  if (Number.isFinite(dataFrom)) {
    const floored = Math.floor(dataFrom / HOUR_MS) * HOUR_MS;
    if (floored > fromMs && floored < endMs) fromMs = floored;
  }
  return {
    span,
    fromMs,
    toMs: endMs,
    from: new Date(fromMs).toISOString().replace('.000Z', 'Z'),
    to: new Date(endMs).toISOString().replace('.000Z', 'Z'),
  };
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
  const usage = await getJson('/api/v1/usage', {window: '30d', by: 'team'});
  const teams = (usage.rows || []).map((r) => r.group.team).filter((t) => t && t !== '(no job)');
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
