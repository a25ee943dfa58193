// Line and stacked-area charts over uPlot (the global `uPlot` from
// /assets/uPlot.iife.min.js). A chart lives in a holder element that the page keeps
// across refreshes: drawing the same kind of chart again only replaces its data, so a
// refresh neither flickers nor resets the legend.

export const BUCKETS = ['active', 'allocated_idle', 'unallocated', 'unavailable', 'unmonitored'];
export const BUCKET_LABELS = {
  active: 'active',
  allocated_idle: 'allocated idle',
  unallocated: 'unallocated',
  unavailable: 'unavailable',
  unmonitored: 'unmonitored',
};
export const BUCKET_COLORS = {
  active: '#2f9e44',
  allocated_idle: '#f08c00',
  unallocated: '#a5b4c8',
  unavailable: '#e03131',
  unmonitored: '#ced4da',
};
// One meaning per colour: green, orange, red and grey are the buckets' (above), the
// utilization line's blue and the kinds' colours (below) are theirs alone; the palette
// for pools and teams has none of them.
export const PALETTE = ['#364fc7', '#15aabf', '#e64980', '#ae3ec9', '#7048e8', '#1864ab', '#5c7cfa',
  '#3bc9db', '#be4bdb', '#f783ac', '#4dabf7', '#9775fa'];
// The effective-utilization line of the fleet, a team or a job.
export const UTIL_COLOR = '#1c7ed6';
export const KIND_COLORS = {training: '#5f3dc4', serving: '#0b7285', notebook: '#a61e4d', batch: '#862e9c', unknown: '#495057'};

// Stable colours for names (pools, teams): each name takes the palette slot its hash
// picks, or the next free one, in the names' sorted order; the same set of names always
// gets the same colours, whatever order the rows arrive in. Returns a Map name -> colour.
export function stableColors(names) {
  const out = new Map();
  const taken = new Set();
  for (const name of [...new Set(names)].sort()) {
    let hash = 0;
    for (const ch of String(name)) hash = (hash * 31 + ch.codePointAt(0)) >>> 0;
    let slot = hash % PALETTE.length;
    for (let i = 0; i < PALETTE.length && taken.has(slot); i++) slot = (slot + 1) % PALETTE.length;
    taken.add(slot);
    out.set(name, PALETTE[slot]);
  }
  return out;
}

const TARGET_COLOR = '#495057';

let steppedPaths = null;
function stepped() {
  if (!steppedPaths) steppedPaths = uPlot.paths.stepped({align: 1});
  return steppedPaths;
}

function utcDate(ts) {
  return uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC');
}

function alpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
}

function widthOf(holder) {
  return Math.max(240, Math.floor(holder.clientWidth || holder.parentElement?.clientWidth || 600));
}

const pct = (v) => (v === null || v === undefined ? '—' : `${(v * 100).toFixed(1)}%`);

// spec: {
//   kind: 'line' | 'stack',
//   times: [unix seconds],
//   series: [{label, values: [number|null], color, dash: bool, raw?: [display values]}],
//   yFormat: 'ratio' | 'hours' | 'money', currency: 'USD' (money: the axis label's unit),
//   height: px, yMax: number (ratio charts: at least 1), yLabel: the value axis's label (default: by yFormat)
// }
//   overlay: {label, color, values: [0..1 | null]}   (stack only: a ratio line on a right axis)
// A 'stack' chart draws series[0] at the bottom; values are stacked in the order given.
export function drawChart(holder, spec) {
  const signature = JSON.stringify([spec.kind, spec.yFormat, spec.height, spec.legend,
    spec.series.map((s) => [s.label, s.color, !!s.dash]), spec.overlay ? spec.overlay.label : null]);
  const data = chartData(spec);
  if (holder._uplot && holder._signature === signature) {
    holder._spec = spec;
    holder._uplot.setData(data);
    return holder._uplot;
  }
  if (holder._uplot) holder._uplot.destroy();
  holder._spec = spec;
  holder._signature = signature;
  holder.dataset.yLabel = yLabelOf(spec) || '';
  holder.replaceChildren();
  const u = new uPlot(chartOptions(holder, spec), data, holder);
  holder._uplot = u;
  if (!holder._resize) {
    holder._resize = new ResizeObserver(() => {
      const w = widthOf(holder);
      if (holder._uplot && Math.abs(holder._uplot.width - w) > 2) {
        holder._uplot.setSize({width: w, height: holder._uplot.height});
      }
    });
    holder._resize.observe(holder);
  }
  return u;
}


// The unit of the value axis: GPU-hours, money (in the currency, or "unnamed unit") or
// none (a ratio); spec.yLabel when given.
function yLabelOf(spec) {
  const fmt = spec.yFormat || 'ratio';
  if (spec.yLabel) return spec.yLabel;
  if (fmt === 'hours') return 'GPU-hours';
  if (fmt === 'money') return `cost (${spec.currency || 'unnamed unit'})`;
  return undefined;
}

function chartData(spec) {
  const data = [spec.times];
  if (spec.kind === 'stack') {
    const n = spec.times.length;
    const cumulative = [];
    let run = new Array(n).fill(0);
    for (const s of spec.series) {
      run = run.map((v, i) => v + (s.values[i] || 0));
      cumulative.push(run);
    }
    for (const c of cumulative) data.push(c);
    if (spec.overlay) data.push(spec.overlay.values);
  } else {
    for (const s of spec.series) data.push(s.values);
  }
  return data;
}

function formatValue(fmt, v) {
  if (v === null || v === undefined) return '—';
  if (fmt === 'ratio') return pct(v);
  if (fmt === 'money') return v.toLocaleString('en-US', {maximumFractionDigits: 0});
  return v.toLocaleString('en-US', {maximumFractionDigits: 1});
}

function chartOptions(holder, spec) {
  const fmt = spec.yFormat || 'ratio';
  const series = [{
    label: 'time (UTC)',
    value: (u, ts) => (ts === null ? '—' : new Date(ts * 1000).toISOString().slice(0, 16).replace('T', ' ')),
  }];
  const stack = spec.kind === 'stack';
  spec.series.forEach((s, k) => {
    series.push({
      label: s.label,
      stroke: s.color,
      width: s.width || (stack ? 1 : 1.5),
      dash: s.dash ? [6, 4] : undefined,
      // A stack's bottom layer fills to the axis; the others fill down to the layer
      // below them (the bands below).
      fill: stack ? (k === 0 ? alpha(s.color, 0.85) : undefined) : s.fill ? alpha(s.color, 0.12) : undefined,
      spanGaps: false,
      points: {show: false},
      // Each value covers its hour: a stack is drawn in steps.
      paths: stack ? stepped() : undefined,
      // The legend shows each layer's own value, not the stacked sum.
      value: (u, v, si, di) => {
        if (di === null || di === undefined) return '—';
        const src = holder._spec.series[si - 1];
        if (!src) return '—';
        if (src.raw) return src.raw[di] ?? '—';
        return formatValue(fmt, src.values[di]);
      },
    });
  });
  if (spec.overlay) {
    // A ratio line over a stack, on its own scale and right-hand axis.
    series.push({
      label: spec.overlay.label,
      stroke: spec.overlay.color,
      width: 2,
      scale: 'r',
      spanGaps: false,
      points: {show: false},
      value: (u, v) => pct(v),
    });
  }
  const yMax = spec.yMax;
  return {
    width: widthOf(holder),
    height: spec.height || 240,
    tzDate: utcDate,
    cursor: {drag: {x: true, y: false}, points: {show: spec.kind !== 'stack'}},
    legend: {show: spec.legend !== false, live: true},
    scales: {
      x: {time: true},
      y: fmt === 'ratio'
        ? {range: (u, min, max) => [0, Math.max(yMax || 1, max || 0)]}
        : {range: (u, min, max) => [0, max > 0 ? max * 1.05 : 1]},
      r: {range: [0, 1]},
    },
    axes: [
      {stroke: '#495057', grid: {stroke: '#e9ecef'}, ticks: {stroke: '#dee2e6'}, values: timeTicks},
      {
        stroke: '#495057',
        grid: {stroke: '#e9ecef'},
        ticks: {stroke: '#dee2e6'},
        size: 64,
        // The unit of the axis: GPU-hours, money (in the currency when known) or none (a ratio).
        label: yLabelOf(spec),
        labelSize: fmt === 'ratio' ? 0 : 18,
        values: (u, splits) => splits.map((v) => (fmt === 'ratio'
          ? `${Math.round(v * 100)}%`
          : v >= 10000 ? `${Math.round(v / 1000)}k` : v.toLocaleString('en-US', {maximumFractionDigits: 1}))),
      },
      ...(spec.overlay ? [{
        scale: 'r', side: 1, stroke: spec.overlay.color, size: 50, grid: {show: false},
        values: (u, splits) => splits.map((v) => `${Math.round(v * 100)}%`),
      }] : []),
    ],
    series,
    bands: stack ? spec.series.slice(1).map((s, k) => ({series: [k + 2, k + 1], fill: alpha(s.color, 0.85)})) : [],
  };
}

// Tick labels in UTC: the date at midnight, the hour otherwise.
function timeTicks(u, splits) {
  return splits.map((ts) => {
    const iso = new Date(ts * 1000).toISOString();
    return iso.slice(11, 16) === '00:00' ? iso.slice(5, 10) : iso.slice(11, 16);
  });
}

// A constant series (a target line) on the chart's time axis.
export function constantSeries(times, value) {
  return times.map(() => value);
}

export {TARGET_COLOR};
