// Formatting of the figures the dashboard shows. Money arrives from the API as a decimal
// string and never passes through a float on its way to the screen: it is rounded to
// cents and grouped by string and BigInt arithmetic. Floats (GPU-hours, ratios) are
// formatted with fixed decimals. The browser test imports this module too, so that the
// text it expects is produced by the same rules.

const MICROS_PER_UNIT = 1000000n;

// Parses a decimal string ("-12.5", "88771.200000") into integer micro-units (BigInt).
// Digits past the sixth decimal are dropped. Returns null for anything else.
export function parseMicros(text) {
  if (typeof text !== 'string') return null;
  const m = /^(-?)(\d+)(?:\.(\d*))?$/.exec(text.trim());
  if (!m) return null;
  const frac = (m[3] || '').slice(0, 6).padEnd(6, '0');
  const v = BigInt(m[2]) * MICROS_PER_UNIT + BigInt(frac);
  return m[1] === '-' ? -v : v;
}

// The exact decimal string of micro-units, six decimals (as the API writes money).
export function microsToString(micros) {
  const neg = micros < 0n;
  const a = neg ? -micros : micros;
  const whole = a / MICROS_PER_UNIT;
  const frac = (a % MICROS_PER_UNIT).toString().padStart(6, '0');
  return `${neg ? '-' : ''}${whole}.${frac}`;
}

// Sums decimal strings exactly; returns the sum as a decimal string.
export function addMoney(values) {
  let sum = 0n;
  for (const v of values) {
    const m = parseMicros(v);
    if (m !== null) sum += m;
  }
  return microsToString(sum);
}

function groupThousands(digits) {
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

// "88771.200000" -> "88,771.20": rounded half up (away from zero) to `decimals`
// places, thousands grouped. Non-decimal input is shown as "—".
export function formatMoney(text, decimals = 2) {
  const micros = parseMicros(text);
  if (micros === null) return '—';
  const neg = micros < 0n;
  let a = neg ? -micros : micros;
  const unit = 10n ** BigInt(6 - decimals);
  a = (a + unit / 2n) / unit;  // half up, in units of 10^-decimals
  const scale = 10n ** BigInt(decimals);
  const whole = groupThousands((a / scale).toString());
  const frac = decimals > 0 ? '.' + (a % scale).toString().padStart(decimals, '0') : '';
  return `${neg && a !== 0n ? '-' : ''}${whole}${frac}`;
}

// Money for a drawing axis only (a float is fine there).
export function moneyToNumber(text) {
  const m = parseMicros(text);
  return m === null ? null : Number(m) / 1e6;
}

// 0.44213 -> "44.2%"; null or undefined -> "—".
export function formatRatio(r, decimals = 1) {
  if (r === null || r === undefined || !Number.isFinite(r)) return '—';
  return `${(r * 100).toFixed(decimals)}%`;
}

// GPU-hours: 43008 -> "43,008.0".
export function formatHours(h, decimals = 1) {
  if (h === null || h === undefined || !Number.isFinite(h)) return '—';
  const s = Math.abs(h).toFixed(decimals);
  const [w, f] = s.split('.');
  const sign = h < 0 && Number(s) !== 0 ? '-' : '';
  return sign + groupThousands(w) + (f !== undefined ? '.' + f : '');
}

// A plain count: 1234 -> "1,234".
export function formatCount(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—';
  return groupThousands(String(Math.round(n)));
}

// RFC 3339 or epoch ms -> "2026-11-23 14:00 UTC" (the dashboard shows UTC throughout,
// like the API and the CLI).
export function formatTime(t) {
  if (t === null || t === undefined || t === '') return '—';
  const d = t instanceof Date ? t : new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return d.toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
}

// A span as the CLI writes one (cli/commands.h FormatDuration): "6d 23h", "5h 10m",
// "12m", "45s", rounded down to the unit shown last.
export function formatDuration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return '—';
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m`;
  return `${s}s`;
}
