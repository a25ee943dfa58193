// The GPU x time heatmap, drawn with fillRect on one canvas: a row per GPU (MIG slices
// indented under their parent), grouped by node, a column per hour, and on the right a
// narrow column colored by the team holding the GPU now. Runs of equal values in a row
// are drawn as one rectangle, so 1,000 GPUs x 168 hours draws in a few milliseconds.
// A device's optional `kinds` marks cells mostly unallocated, unavailable or unmonitored:
// those are drawn in their buckets' colours (charts.js), not on the utilization scale.
import {BUCKET_COLORS} from './charts.js';

const LABEL_WIDTH = 170;
const HOLDER_WIDTH = 14;
const AXIS_HEIGHT = 20;
const NODE_GAP = 3;
const NULL_COLOR = BUCKET_COLORS.unmonitored;
const KIND_CODES = {unallocated: 102, unavailable: 103, unmonitored: 101};
const KIND_COLORS = {101: NULL_COLOR, 102: BUCKET_COLORS.unallocated, 103: BUCKET_COLORS.unavailable};

// 0..100 -> a color from the orange of "allocated, idle" (held, doing nothing) through
// pale yellow and blue to deep navy (busy). "No data" is a neutral gray, apart from it.
const STOPS = [[0, [247, 162, 64]], [12, [255, 224, 160]], [35, [199, 233, 180]], [55, [65, 182, 196]], [78, [34, 94, 168]], [100, [8, 29, 88]]];
const COLORS = (() => {
  const out = [];
  for (let v = 0; v <= 100; v++) {
    let i = 0;
    while (i < STOPS.length - 2 && v > STOPS[i + 1][0]) i++;
    const [v0, c0] = STOPS[i];
    const [v1, c1] = STOPS[i + 1];
    const t = (v - v0) / (v1 - v0);
    const c = c0.map((x, k) => Math.round(x + (c1[k] - x) * t));
    out.push(`rgb(${c[0]},${c[1]},${c[2]})`);
  }
  return out;
})();

export function colorFor(value) {
  if (value === null || value === undefined) return NULL_COLOR;
  return COLORS[Math.max(0, Math.min(100, Math.round(value)))];
}

// "GPU-8d78ec7f-4ab3-..." -> "GPU-8d78ec7f".
function shortId(uuid) {
  const m = /^([A-Z]+-[0-9a-fA-F]{8})/.exec(uuid || '');
  return m ? m[1] : String(uuid || '').slice(0, 12);
}

export function rowHeightFor(count) {
  if (count <= 80) return 14;
  if (count <= 200) return 10;
  if (count <= 400) return 8;  // still tall enough for a GPU index
  return 4;
}

// Lays out the rows: y of each device row and of each node's group.
export function layout(devices, rowHeight) {
  const rows = [];
  const nodes = [];
  let y = AXIS_HEIGHT;
  let current = null;
  for (let i = 0; i < devices.length; i++) {
    const d = devices[i];
    if (!current || current.node !== d.node) {
      if (current) y += NODE_GAP;
      current = {node: d.node, pool: d.pool, y0: y, y1: y};
      nodes.push(current);
    }
    rows.push({y, device: d, index: i});
    y += rowHeight;
    current.y1 = y;
  }
  return {rows, nodes, height: y + 2};
}

// Draws the reply on the canvas at its current CSS width. `holderColor(device)` gives
// the color of the holder column (null: nobody holds it). Returns what was drawn:
// {rows, drawMs}; the canvas keeps the layout for the tooltip.
// `label(device)` gives a row's label (null: a short id).
export function drawHeatmap(canvas, reply, holderColor, label = () => null) {
  const t0 = performance.now();
  const devices = reply.devices || [];
  const steps = (reply.times || []).length;
  const rowHeight = rowHeightFor(devices.length);
  const lay = layout(devices, rowHeight);
  const cssWidth = Math.max(400, Math.floor(canvas.parentElement.clientWidth || 800));
  const dpr = window.devicePixelRatio || 1;
  canvas.style.width = `${cssWidth}px`;
  canvas.style.height = `${lay.height}px`;
  canvas.width = Math.round(cssWidth * dpr);
  canvas.height = Math.round(lay.height * dpr);
  const ctx = canvas.getContext('2d', {alpha: false});
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, cssWidth, lay.height);

  const left = LABEL_WIDTH;
  const right = cssWidth - HOLDER_WIDTH - 6;
  const colWidth = steps > 0 ? (right - left) / steps : 0;
  const xs = new Float64Array(steps + 1);
  for (let i = 0; i <= steps; i++) xs[i] = Math.round(left + i * colWidth);

  // Cells, a run of equal values at a time, batched by color: one fillStyle per color
  // (102 at most) rather than one per rectangle.
  const gap = rowHeight > 4 ? 1 : 0;
  const runs = [];  // per color index (0..100, 101 no data, 102 unallocated, 103 unavailable): flat [x, y, w, ...]
  for (let k = 0; k <= 103; k++) runs.push([]);
  const codes = new Uint8Array(steps);
  for (const row of lay.rows) {
    const values = row.device.values || [];
    const kinds = row.device.kinds;
    for (let i = 0; i < steps; i++) {
      const v = values[i] ?? null;
      codes[i] = kinds && kinds[i] ? KIND_CODES[kinds[i]] : v === null ? 101 : Math.max(0, Math.min(100, Math.round(v)));
    }
    let start = 0;
    while (start < steps) {
      const k = codes[start];
      let end = start + 1;
      while (end < steps && codes[end] === k) end++;
      runs[k].push(xs[start], row.y, xs[end] - xs[start]);
      start = end;
    }
  }
  for (let k = 0; k <= 103; k++) {
    const r = runs[k];
    if (!r.length) continue;
    ctx.fillStyle = k > 100 ? KIND_COLORS[k] : COLORS[k];
    for (let i = 0; i < r.length; i += 3) ctx.fillRect(r[i], r[i + 1], r[i + 2], rowHeight - gap);
  }
  for (const row of lay.rows) {
    // The parent/slice marker left of the cells: slices sit indented under their GPU.
    ctx.fillStyle = row.device.parent ? '#adb5bd' : '#495057';
    ctx.fillRect(row.device.parent ? left - 8 : left - 14, row.y, row.device.parent ? 5 : 8, Math.max(1, rowHeight - 1));
    const hc = holderColor(row.device);
    ctx.fillStyle = hc || NULL_COLOR;
    ctx.fillRect(right + 6, row.y, HOLDER_WIDTH, rowHeight - gap);
  }

  // Labels: node names beside their group, devices when the rows are tall enough.
  ctx.fillStyle = '#212529';
  ctx.textBaseline = 'middle';
  ctx.font = '11px system-ui, sans-serif';
  for (const n of lay.nodes) {
    if (n.y1 - n.y0 >= 9) ctx.fillText(n.node, 4, n.y0 + Math.min(7, (n.y1 - n.y0) / 2));
    ctx.fillStyle = '#dee2e6';
    ctx.fillRect(0, n.y0 - 1, left - 4, 1);
    ctx.fillStyle = '#212529';
  }
  if (rowHeight >= 8) {
    ctx.font = `${Math.min(10, rowHeight)}px system-ui, sans-serif`;
    ctx.fillStyle = '#495057';
    for (const row of lay.rows) {
      const d = row.device;
      const text = label(d) || (d.parent ? `  └ ${d.mig_profile || 'MIG'}` : shortId(d.uuid));
      ctx.fillText(d.parent ? `  ${text}` : text, 84, row.y + rowHeight / 2);
    }
  }

  // Time axis: a tick per day (or per 6 hours for short windows).
  const times = reply.times || [];
  ctx.font = '10px system-ui, sans-serif';
  ctx.fillStyle = '#495057';
  const every = steps <= 48 ? 6 : 24;
  for (let i = 0; i < steps; i++) {
    const d = new Date(times[i] * 1000);
    if (d.getUTCHours() % every !== 0) continue;
    ctx.fillRect(xs[i], AXIS_HEIGHT - 5, 1, 5);
    const text = every === 24 ? d.toISOString().slice(5, 10) : d.toISOString().slice(11, 16);
    if (xs[i] + 32 < right) ctx.fillText(text, xs[i] + 2, 8);
  }
  ctx.fillText('now', right + 2, 8);

  canvas._layout = {lay, xs, steps, rowHeight, left, right, devices, times};
  // How many runs of cells were drawn in each bucket's colour (for the browser test).
  canvas.dataset.unallocatedRuns = String(runs[102].length / 3);
  canvas.dataset.unavailableRuns = String(runs[103].length / 3);
  canvas.dataset.rows = String(lay.rows.length);
  canvas.dataset.columns = String(steps);
  const drawMs = performance.now() - t0;
  canvas.dataset.drawMs = drawMs.toFixed(1);
  return {rows: lay.rows.length, drawMs};
}

// The cell under a point of the canvas (CSS pixels), or null.
export function cellAt(canvas, x, y) {
  const L = canvas._layout;
  if (!L) return null;
  const rows = L.lay.rows;
  let lo = 0;
  let hi = rows.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (rows[mid].y <= y) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  // In the gap under a row (between nodes), the row above answers: no flicker.
  if (found < 0 || y >= rows[found].y + L.rowHeight + 4) return null;
  const row = rows[found];
  if (x >= L.right + 4) return {device: row.device, step: null, holderColumn: true};
  if (x < L.left || L.steps === 0) return {device: row.device, step: null};
  let step = Math.floor(((x - L.left) / (L.right - L.left)) * L.steps);
  step = Math.max(0, Math.min(L.steps - 1, step));
  return {device: row.device, step, time: L.times[step], value: (row.device.values || [])[step] ?? null};
}

// The legend: a gradient strip from 0% to 100% and the "no data" swatch.
export function legendCanvas(width = 220) {
  const c = document.createElement('canvas');
  const dpr = window.devicePixelRatio || 1;
  c.width = width * dpr;
  c.height = 12 * dpr;
  c.style.width = `${width}px`;
  c.style.height = '12px';
  const ctx = c.getContext('2d');
  ctx.scale(dpr, dpr);
  for (let v = 0; v <= 100; v++) {
    ctx.fillStyle = COLORS[v];
    ctx.fillRect((v / 101) * width, 0, width / 101 + 1, 12);
  }
  return c;
}

export {NULL_COLOR};
export const HELD_IDLE_COLOR = COLORS[0];
