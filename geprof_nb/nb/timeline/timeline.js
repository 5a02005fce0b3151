// geprof timeline: the browser side of geprof_nb.nb.timeline.Timeline (an anywidget ES module).
//
// Draws lanes on a canvas from the level-of-detail views the kernel sends (custom messages with
// binary buffers), asks for a finer view when the user zooms or pans, and never puts data into HTML:
// every text from the run goes through textContent or the canvas's fillText.
//
// Test hooks (data-* attributes of the root .geprof-timeline): t0/t1 (the visible window, µs since
// the first step's start), requests / views (view requests sent / answered), columnUs (the column
// width of the data drawn), bytes (of the last view), frameMs (the last frame's drawing time),
// frames, layout (JSON: each drawn lane's id, label, y and height in CSS px from the canvas top),
// trackLeft / trackWidth (the time axis in the canvas), inputMs (from the last wheel, drag or key
// event to the frame that showed it), firstViewAt (performance.now() of the first frame with data),
// roundTripMs (the last view request's, to its data drawn), searchTasks (the last search's count).

const LABEL_WIDTH = 236;
const AXIS_HEIGHT = 30;
const LANE_HEIGHT = { spans: 22, summary: 30, curve: 46 };
const LANE_GAP = 3;
const PAD = 0.5; // share of the visible window asked for on each side, so a pan shows data at once
const OVERSAMPLE = 2; // columns asked for per CSS pixel of the visible window ... times (1 + 2 * PAD)
const MIN_WINDOW_US = 0.01;
const FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
const SMALL_FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
const HIT = "#ffb000";
const SELECTED = "#111111";

// ------------------------------------------------------------------------------ formatting
function fmtNumber(x, decimals) {
  return x.toLocaleString("en-US", { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
}

// A time in µs in the unit that reads best (ns, µs, ms, s), 3 decimals.
export function fmtTime(us) {
  const a = Math.abs(us);
  if (a >= 1e6) return fmtNumber(us / 1e6, 3) + " s";
  if (a >= 1e3) return fmtNumber(us / 1e3, 3) + " ms";
  if (a >= 1 || a === 0) return fmtNumber(us, 3) + " µs";
  return fmtNumber(us * 1e3, 1) + " ns";
}

// Tick spacing (µs) of about `target` px, 1/2/5 x 10^k, and the unit and decimals of its labels.
export function ticks(t0, t1, widthPx, target = 110) {
  const raw = ((t1 - t0) / Math.max(widthPx, 1)) * target;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) || 10 * p;
  const [scale, unit] = step >= 1e5 ? [1e6, "s"] : step >= 100 ? [1e3, "ms"] : [1, "µs"];
  const decimals = Math.max(0, Math.ceil(-Math.log10(step / scale) - 1e-9));
  const out = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
    const v = Math.abs(t) < step / 1e6 ? 0 : t;
    out.push({ t: v, label: fmtNumber(v / scale, decimals) + " " + unit });
  }
  return out;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function typed(buffers, index, T) {
  const dv = buffers[index];
  return new T(dv.buffer.slice(dv.byteOffset, dv.byteOffset + dv.byteLength));
}

function decodeSpans(h, buffers) {
  if (!h) return null;
  const [s, d, k, n, r] = h.exact;
  const [c, cnt, b, ck, hit] = h.columns;
  return {
    start: typed(buffers, s, Float64Array), dur: typed(buffers, d, Float64Array), kind: typed(buffers, k, Uint16Array),
    name: typed(buffers, n, Int32Array), ref: typed(buffers, r, Float64Array),
    col: typed(buffers, c, Uint32Array), count: typed(buffers, cnt, Uint32Array), busy: typed(buffers, b, Float32Array),
    ckind: typed(buffers, ck, Uint16Array), hit: typed(buffers, hit, Uint8Array),
    members: h.members || 1, overlay: h.overlay ? decodeSpans(h.overlay, buffers) : null,
  };
}

function decodeView(content, buffers) {
  const lanes = {};
  for (const [id, h] of Object.entries(content.lanes)) {
    lanes[id] = h.curve ? { t: typed(buffers, h.curve[0], Float64Array), v: typed(buffers, h.curve[1], Float32Array) }
      : decodeSpans(h, buffers);
  }
  let bytes = JSON.stringify(content).length;
  for (const b of buffers) bytes += b.byteLength;
  // every span exact and every curve point sent: zooming in needs no finer data
  const allExact = Object.values(lanes).every((d) => (d.t ? d.t.length < content.columns
    : d.col.length === 0 && (!d.overlay || d.overlay.col.length === 0)));
  return { t0: content.t0, t1: content.t1, columns: content.columns, cw: (content.t1 - content.t0) / content.columns,
           lanes, bytes, allExact };
}

// Position of the last value <= x in a sorted typed array (-1 if none).
function lastAtOrBefore(arr, x) {
  let lo = 0, hi = arr.length - 1, ans = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (arr[mid] <= x) { ans = mid; lo = mid + 1; } else hi = mid - 1;
  }
  return ans;
}

// ------------------------------------------------------------------------------ the widget
function render({ model, el: host }) {
  const meta = model.get("meta");
  const lanes = meta.lanes;
  const kinds = meta.kinds;
  const names = meta.names;
  const laneById = Object.fromEntries(lanes.map((l) => [l.id, l]));
  const expanded = new Set();
  const state = {
    t0: model.get("window")[0], t1: model.get("window")[1], data: null, inflight: null, pending: false,
    requests: 0, views: 0, query: "", hits: null, selected: null, hover: null, details: new Map(),
    nextId: 1, frames: 0, width: 0, height: 0, scrollTop: 0, drag: null, lastMouse: null, error: "", inputAt: null,
  };

  // ---- DOM
  const root = el("div", "geprof-timeline");
  root.tabIndex = 0;
  root.setAttribute("data-lm-suppress-shortcuts", "true"); // JupyterLab: our keys are not notebook shortcuts
  const bar = el("div", "gt-toolbar");
  const title = el("span", "gt-title", meta.title ? "Timeline · " + meta.title : "Timeline");
  const search = el("input", "gt-search");
  search.type = "search";
  search.placeholder = "search op names";
  search.setAttribute("aria-label", "search op names");
  const searchResult = el("span", "gt-search-result");
  const stepSelect = el("select", "gt-step");
  stepSelect.setAttribute("aria-label", "zoom to a step");
  stepSelect.appendChild(new Option("whole run", "all"));
  for (const [step] of meta.steps) stepSelect.appendChild(new Option("step " + step, String(step)));
  const reset = el("button", "gt-reset", "whole run");
  reset.title = "zoom out to the whole run";
  const help = el("span", "gt-help", "wheel or W/S: zoom · drag or A/D: pan · click an op: its instances");
  bar.append(title, search, searchResult, stepSelect, reset, help);
  const legend = el("div", "gt-legend");
  for (const k of meta.legend || []) {
    const item = el("span", "gt-legend-item");
    const sw = el("span", "gt-swatch");
    sw.style.background = kinds[k].color;
    item.append(sw, document.createTextNode(kinds[k].name));
    legend.appendChild(item);
  }
  const body = el("div", "gt-body");
  const main = el("div", "gt-main");
  const scroller = el("div", "gt-scroller");
  const canvas = el("canvas", "gt-canvas");
  const spacer = el("div", "gt-spacer");
  scroller.append(canvas, spacer);
  const tooltip = el("div", "gt-tooltip");
  tooltip.style.display = "none";
  main.append(scroller, tooltip);
  const panel = el("div", "gt-panel");
  panel.style.display = "none";
  body.append(main, panel);
  const status = el("div", "gt-status");
  root.append(bar, legend, body, status);
  host.appendChild(root);
  const ctx = canvas.getContext("2d");

  // ---- geometry
  function visibleLanes() {
    return lanes.filter((l) => {
      for (let p = l.parent; p; p = laneById[p].parent) if (!expanded.has(p)) return false;
      return true;
    });
  }
  function depth(l) {
    let d = 0;
    for (let p = l.parent; p; p = laneById[p].parent) d++;
    return d;
  }
  function layout() {
    let y = AXIS_HEIGHT;
    const out = [];
    for (const l of visibleLanes()) {
      const h = LANE_HEIGHT[l.type] || LANE_HEIGHT.spans;
      out.push({ lane: l, y, h });
      y += h + LANE_GAP;
    }
    return { rows: out, total: y };
  }
  const trackWidth = () => Math.max(50, state.width - LABEL_WIDTH);
  const xOf = (t) => LABEL_WIDTH + ((t - state.t0) / (state.t1 - state.t0)) * trackWidth();
  const tOf = (x) => state.t0 + ((x - LABEL_WIDTH) / trackWidth()) * (state.t1 - state.t0);

  // as tall as the lanes, at most the widget's height (the lanes scroll beyond it)
  const fittedHeight = () => Math.min(model.get("height"), Math.max(120, layout().total + 6));
  function resize() {
    const w = Math.max(300, Math.floor(main.clientWidth || host.clientWidth || 900));
    const h = fittedHeight();
    state.width = w;
    state.height = h;
    scroller.style.height = h + "px";
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.floor(w * dpr);
    canvas.height = Math.floor(h * dpr);
    canvas.style.width = w + "px";
    canvas.style.height = h + "px";
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  }

  // ---- data
  function wanted() {
    return visibleLanes().map((l) => l.id);
  }
  function covered() {
    const d = state.data;
    if (!d || d.query !== state.query) return false;
    const span = state.t1 - state.t0;
    const px = span / trackWidth();
    if (state.t0 < d.t0 - 1e-9 * span || state.t1 > d.t1 + 1e-9 * span) return false;
    if (!wanted().every((id) => id in d.lanes)) return false;
    if (d.cw > px * 1.5 && !d.allExact) return false; // columns wider than 1.5 px: ask for finer ones
    return d.cw >= px / (4 * OVERSAMPLE); // zoomed far out of a fine view: ask for a coarser, lighter one
  }
  let timer = null;
  function schedule(delay = 30) {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => { timer = null; if (!covered()) request(); }, delay);
  }
  function request() {
    if (state.inflight) { state.pending = true; return; }
    const span = state.t1 - state.t0;
    const t0 = state.t0 - PAD * span, t1 = state.t1 + PAD * span;
    const columns = Math.round(trackWidth() * OVERSAMPLE * (1 + 2 * PAD));
    const id = state.nextId++;
    state.inflight = { id, sent: performance.now(), query: state.query };
    state.requests++;
    root.dataset.requests = String(state.requests);
    model.send({ type: "view", id, t0, t1, columns, lanes: wanted(), query: state.query });
  }
  // the kernel's `window` follows the view once it rests: a state sync per frame would cost the main
  // thread (and the kernel) work while the user moves
  let syncTimer = null;
  function syncWindow() {
    if (syncTimer) clearTimeout(syncTimer);
    syncTimer = setTimeout(() => {
      syncTimer = null;
      model.set("window", [state.t0, state.t1]);
      model.save_changes();
    }, 400);
  }
  const waiting = new Map(); // id -> callback, for op / detail / search
  function ask(content, callback) {
    const id = state.nextId++;
    waiting.set(id, callback);
    model.send({ ...content, id });
  }
  function onMessage(content, buffers) {
    if (state.inflight && content.id === state.inflight.id) {
      const sent = state.inflight;
      state.inflight = null;
      if (content.type === "view") {
        const view = decodeView(content, buffers || []);
        view.query = sent.query;
        state.data = view;
        root.dataset.roundTripMs = (performance.now() - sent.sent).toFixed(1);
        state.views++;
        root.dataset.views = String(state.views);
        root.dataset.bytes = String(view.bytes);
        root.dataset.columnUs = String(view.cw);
        state.error = "";
      } else {
        state.error = content.message;
      }
      draw();
      if (state.pending) { state.pending = false; schedule(0); }
      return;
    }
    const cb = waiting.get(content.id);
    if (cb) { waiting.delete(content.id); cb(content); }
  }
  model.on("msg:custom", onMessage);

  // ---- drawing
  function colorOf(k) { return (kinds[k] && kinds[k].color) || "#888"; }

  // Rectangles grouped by colour and shade, each group filled as one path: far fewer canvas state
  // changes than a fill per rectangle, which is what a frame of a million-task view costs to raster.
  function batches() {
    const groups = new Map();
    return {
      rect(key, color, alpha, x, y, w, h) {
        let g = groups.get(key);
        if (!g) { g = { color, alpha, path: new Path2D() }; groups.set(key, g); }
        g.path.rect(x, y, w, h);
      },
      fill() {
        for (const g of groups.values()) { ctx.globalAlpha = g.alpha; ctx.fillStyle = g.color; ctx.fill(g.path); }
        ctx.globalAlpha = 1;
      },
    };
  }
  const SHADES = 8; // shades of a merged column's colour, by how busy it is

  function drawSpans(lane, d, y, h) {
    const s = state.data;
    const cw = s.cw;
    const dim = state.hits && state.hits.size > 0;
    const scale = trackWidth() / (state.t1 - state.t0);
    const ox = (t) => LABEL_WIDTH + (t - state.t0) * scale;
    const left = LABEL_WIDTH, right = LABEL_WIDTH + trackWidth();
    const per = lane.type === "summary" ? d.members : 1;
    // merged columns, binned to screen pixels (a view has 2 columns a pixel): per pixel the busy time of
    // its columns and the kind of the busiest, shaded by how busy the pixel is
    const merged = batches();
    const hits = new Path2D();
    let bin = -1, binBusy = 0, binKind = 0, binTop = -1, binHit = false, binX0 = 0, binX1 = 0;
    const flush = () => {
      if (bin < 0) return;
      const spanUs = (binX1 - binX0) / scale;
      const fill = Math.min(1, binBusy / (spanUs * per));
      const level = Math.max(1, Math.round(fill * SHADES));
      const dimmed = dim && !binHit;
      const alpha = (0.3 + (0.7 * level) / SHADES) * (dimmed ? 0.35 : 1);
      const w = Math.max(1, binX1 - binX0);
      if (lane.type === "summary") {
        const hh = Math.max(2, (h - 2) * fill);
        merged.rect(binKind * 64 + level * 2 + dimmed, colorOf(binKind), alpha, binX0, y + h - 1 - hh, w, hh);
      } else {
        merged.rect(binKind * 64 + level * 2 + dimmed, colorOf(binKind), alpha, binX0, y + 1, w, h - 2);
      }
      if (binHit) hits.rect(binX0, y - 2, Math.max(2, w), 3);
      bin = -1;
    };
    for (let i = 0; i < d.col.length; i++) {
      const a = s.t0 + d.col[i] * cw;
      const x0 = ox(a), x1 = ox(a + cw);
      if (x1 < left || x0 > right) continue;
      const px = Math.floor(x0);
      if (x1 - x0 >= 1 || px !== bin) {
        flush();
        bin = px; binBusy = 0; binTop = -1; binHit = false;
        binX0 = x1 - x0 >= 1 ? Math.round(x0) : px;
        binX1 = x1 - x0 >= 1 ? Math.max(Math.round(x1), Math.round(x0) + 1) : px + 1;
      }
      binBusy += d.busy[i];
      if (d.busy[i] > binTop) { binTop = d.busy[i]; binKind = d.ckind[i]; }
      binHit = binHit || d.hit[i] > 0;
      if (x1 - x0 >= 1) flush();
    }
    flush();
    merged.fill();
    ctx.fillStyle = HIT;
    ctx.fill(hits);
    // exact spans: one path per kind (and dimmed or not), white separators, then outlines and names
    const exact = batches();
    const separators = new Path2D();
    const labels = [];
    for (let i = 0; i < d.start.length; i++) {
      let x0 = ox(d.start[i]), x1 = ox(d.start[i] + d.dur[i]);
      if (x1 < left || x0 > right) continue;
      // whole pixels: crisp edges, and rectangles the rasterizer fills without anti-aliasing
      x0 = Math.round(Math.max(x0, left - 1));
      x1 = Math.round(Math.min(x1, right + 1));
      const w = x1 - x0;
      const isHit = dim && d.name[i] >= 0 && state.hits.has(d.name[i]);
      const dimmed = dim && !isHit;
      exact.rect(d.kind[i] * 2 + dimmed, colorOf(d.kind[i]), dimmed ? 0.3 : 1, x0, y + 1, Math.max(1, w), h - 2);
      if (w > 5) separators.rect(x1 - 1, y + 1, 1, h - 2);
      if (isHit || (state.selected !== null && d.name[i] === state.selected) || (w > 36 && d.name[i] >= 0)) {
        labels.push([i, x0, w, isHit]);
      }
    }
    exact.fill();
    ctx.fillStyle = "rgba(255,255,255,0.55)";
    ctx.fill(separators);
    ctx.font = SMALL_FONT;
    ctx.textBaseline = "middle";
    for (const [i, x0, w, isHit] of labels) {
      if (isHit) { ctx.strokeStyle = HIT; ctx.lineWidth = 2; ctx.strokeRect(x0, y, Math.max(w, 2), h); }
      if (state.selected !== null && d.name[i] === state.selected) {
        ctx.strokeStyle = SELECTED; ctx.lineWidth = 1.5; ctx.strokeRect(x0 + 0.5, y + 0.5, Math.max(w - 1, 1), h - 1);
      }
      if (w > 36 && d.name[i] >= 0) {
        ctx.save();
        ctx.beginPath();
        ctx.rect(x0 + 2, y, w - 4, h);
        ctx.clip();
        ctx.fillStyle = "#fff";
        ctx.fillText(names[d.name[i]], x0 + 3, y + h / 2 + 0.5);
        ctx.restore();
      }
    }
    if (d.overlay) {
      const o = d.overlay;
      const strip = new Path2D();
      for (let i = 0; i < o.start.length; i++) {
        const x0 = ox(o.start[i]), x1 = ox(o.start[i] + o.dur[i]);
        if (x1 >= left && x0 <= right) strip.rect(x0, y + h - 6, Math.max(1, x1 - x0), 5);
      }
      for (let i = 0; i < o.col.length; i++) {
        const x0 = ox(s.t0 + o.col[i] * cw);
        if (x0 >= left - 2 && x0 <= right) strip.rect(x0, y + h - 6, Math.max(1, cw * scale), 5);
      }
      ctx.fillStyle = colorOf(kindCode(meta, "exposed communication"));
      ctx.fill(strip);
    }
  }

  // The step curve per screen pixel: a bar from the pixel's lowest to its highest value, over the area
  // under the value it ends with (held through pixels without a point): two paths of at most one
  // rectangle a pixel, so a curve of a million records costs what a short one does to raster.
  function drawCurve(lane, d, y, h) {
    if (!d.t.length) return;
    const max = lane.max > 0 ? lane.max : 1;
    const base = y + h - 2;
    const yOf = (v) => base - (v / max) * (h - 6);
    const left = LABEL_WIDTH, width = Math.ceil(trackWidth());
    const scale = trackWidth() / (state.t1 - state.t0);
    const area = new Path2D(), line = new Path2D();
    let i = 0;
    // the value held at the first pixel: the last point at or before it
    let held = null;
    for (let p = 0; p < width; p++) {
      const pixelEnd = state.t0 + (p + 1) / scale;
      let lo = Infinity, hi = -Infinity;
      if (held !== null) { lo = held; hi = held; }
      while (i < d.t.length && d.t[i] < pixelEnd) {
        const v = d.v[i++];
        if (v < lo) lo = v;
        if (v > hi) hi = v;
        held = v;
      }
      if (held === null) continue;
      const yh = yOf(held);
      area.rect(left + p, yh, 1, base - yh);
      const top = yOf(hi), bottom = yOf(lo);
      line.rect(left + p, top - 0.6, 1, Math.max(1.2, bottom - top + 1.2));
    }
    ctx.fillStyle = "rgba(76,114,176,0.18)";
    ctx.fill(area);
    ctx.fillStyle = "#4c72b0";
    ctx.fill(line);
  }

  function draw() {
    const began = performance.now();
    if (fittedHeight() !== state.height) resize();
    const w = state.width, h = state.height;
    ctx.clearRect(0, 0, w, h);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, w, h);
    const { rows, total } = layout();
    spacer.style.height = Math.max(0, total - h) + "px";
    const top = state.scrollTop;
    const tk = ticks(state.t0, state.t1, trackWidth());
    // lanes
    const drawn = [];
    for (let i = 0; i < rows.length; i++) {
      const { lane, h: lh } = rows[i];
      const y = rows[i].y - top;
      if (y + lh < AXIS_HEIGHT || y > h) continue;
      drawn.push({ id: lane.id, label: lane.label, y, h: lh });
      ctx.fillStyle = i % 2 ? "#f7f8fa" : "#ffffff";
      ctx.fillRect(LABEL_WIDTH, y - 1, trackWidth(), lh + 2);
      const d = state.data && state.data.lanes[lane.id];
      ctx.save();
      ctx.beginPath();
      ctx.rect(LABEL_WIDTH, y - 3, trackWidth(), lh + 4);
      ctx.clip();
      if (d) (lane.type === "curve" ? drawCurve : drawSpans)(lane, d, y, lh);
      ctx.restore();
    }
    // grid lines over the lanes
    ctx.fillStyle = "rgba(0,0,0,0.06)";
    for (const t of tk) ctx.fillRect(Math.round(xOf(t.t)), AXIS_HEIGHT, 1, h - AXIS_HEIGHT);
    // labels column
    ctx.fillStyle = "#f3f4f6";
    ctx.fillRect(0, AXIS_HEIGHT, LABEL_WIDTH, h - AXIS_HEIGHT);
    ctx.fillStyle = "#d0d4da";
    ctx.fillRect(LABEL_WIDTH - 1, 0, 1, h);
    ctx.textBaseline = "middle";
    for (const r of drawn) {
      const lane = laneById[r.id];
      const indent = 8 + 12 * depth(lane);
      ctx.font = lane.type === "summary" ? "600 " + FONT : FONT;
      ctx.fillStyle = "#1f2933";
      let text = lane.label;
      if (lane.expandable) text = (expanded.has(lane.id) ? "▾ " : "▸ ") + text;
      ctx.save();
      ctx.beginPath();
      ctx.rect(0, r.y, LABEL_WIDTH - 4, r.h);
      ctx.clip();
      ctx.fillText(text, indent, r.y + (lane.note ? r.h / 2 - 5 : r.h / 2));
      if (lane.note) {
        ctx.font = SMALL_FONT;
        ctx.fillStyle = "#6b7280";
        ctx.fillText(lane.note, indent + (lane.expandable ? 12 : 0), r.y + r.h / 2 + 7);
      }
      if (lane.type === "curve") {
        ctx.font = SMALL_FONT;
        ctx.fillStyle = "#6b7280";
        ctx.fillText("max " + fmtNumber(lane.max, 1) + " " + lane.unit, indent, r.y + r.h / 2 + 12);
      }
      ctx.restore();
    }
    // the axis
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, w, AXIS_HEIGHT);
    ctx.fillStyle = "#d0d4da";
    ctx.fillRect(0, AXIS_HEIGHT - 1, w, 1);
    ctx.font = SMALL_FONT;
    ctx.textBaseline = "alphabetic";
    ctx.fillStyle = "#4b5563";
    ctx.fillText("time since the first step's start", 8, 18);
    for (const t of tk) {
      const x = Math.round(xOf(t.t));
      if (x < LABEL_WIDTH || x > w) continue;
      ctx.fillStyle = "#9ca3af";
      ctx.fillRect(x, AXIS_HEIGHT - 7, 1, 6);
      ctx.fillStyle = "#374151";
      ctx.fillText(t.label, x + 3, AXIS_HEIGHT - 11);
    }
    if (state.error) {
      ctx.fillStyle = "#b91c1c";
      ctx.fillText(state.error, LABEL_WIDTH + 8, AXIS_HEIGHT + 16);
    }
    const now = performance.now();
    const ms = now - began;
    if (state.inputAt !== null) { root.dataset.inputMs = (now - state.inputAt).toFixed(2); state.inputAt = null; }
    if (state.views >= 1 && !root.dataset.firstViewAt) root.dataset.firstViewAt = now.toFixed(1);
    state.frames++;
    root.dataset.frames = String(state.frames);
    root.dataset.frameMs = ms.toFixed(2);
    root.dataset.t0 = String(state.t0);
    root.dataset.t1 = String(state.t1);
    root.dataset.layout = JSON.stringify(drawn);
    root.dataset.trackLeft = String(LABEL_WIDTH);
    root.dataset.trackWidth = String(trackWidth());
    updateStatus();
  }

  function updateStatus() {
    const parts = [fmtTime(state.t0) + " – " + fmtTime(state.t1) + "  (" + fmtTime(state.t1 - state.t0) + " shown)"];
    if (state.data) parts.push("last view " + fmtNumber(state.data.bytes / 1024, 1) + " KiB");
    if (state.inflight) parts.push("loading…");
    status.textContent = parts.join(" · ");
  }

  // one frame per animation frame, however many events asked for one
  let frameRequested = false;
  function redraw() {
    if (frameRequested) return;
    frameRequested = true;
    requestAnimationFrame(() => { frameRequested = false; draw(); });
  }

  // ---- moving the view
  const extent = meta.extent;
  function setWindow(t0, t1, immediate = false) {
    const full = extent[1] - extent[0];
    let span = Math.max(MIN_WINDOW_US, Math.min(t1 - t0, full * 1.5));
    let mid = (t0 + t1) / 2;
    const lo = extent[0] - full * 0.25, hi = extent[1] + full * 0.25;
    mid = Math.min(Math.max(mid, lo + span / 2), hi - span / 2);
    if (span >= hi - lo) mid = (lo + hi) / 2;
    state.t0 = mid - span / 2;
    state.t1 = mid + span / 2;
    if (immediate) draw(); else redraw();
    if (!covered()) schedule(immediate ? 0 : 40);
    syncWindow();
  }
  function zoomAt(t, factor) {
    setWindow(t - (t - state.t0) * factor, t + (state.t1 - t) * factor);
  }

  // ---- hit testing
  function rowAt(y) {
    const { rows } = layout();
    const yy = y + state.scrollTop;
    return rows.find((r) => yy >= r.y && yy < r.y + r.h + LANE_GAP) || null;
  }
  function hitAt(x, y) {
    const row = rowAt(y);
    if (!row || !state.data || x < LABEL_WIDTH) return null;
    const d = state.data.lanes[row.lane.id];
    if (!d) return null;
    const t = tOf(x);
    const tol = (3 * (state.t1 - state.t0)) / trackWidth();
    if (row.lane.type === "curve") {
      const i = lastAtOrBefore(d.t, t);
      return i < 0 ? null : { lane: row.lane, curve: true, t, v: d.v[i] };
    }
    // exact spans: the innermost (shortest) one under the cursor
    let best = -1;
    const i0 = lastAtOrBefore(d.start, t + tol);
    for (let i = i0; i >= 0 && i > i0 - 4000; i--) {
      if (d.start[i] + d.dur[i] + tol >= t && d.start[i] - tol <= t) {
        if (best < 0 || d.dur[i] < d.dur[best]) best = i;
      }
    }
    if (best >= 0) return { lane: row.lane, exact: best, d };
    const cw = state.data.cw;
    const c = Math.floor((t - state.data.t0) / cw);
    const j = lastAtOrBefore(d.col, c);
    if (j >= 0 && (d.col[j] === c || (d.col[j] >= c - 1 && cw < tol))) return { lane: row.lane, column: j, d };
    return null;
  }

  // ---- tooltip
  function line(parent, key, value) {
    const row = el("div", "gt-tip-row");
    row.append(el("span", "gt-tip-key", key), el("span", "gt-tip-value", value));
    parent.appendChild(row);
  }
  function stepOf(t) {
    for (const [step, lo, hi] of meta.steps) if (t >= lo && t <= hi) return step;
    return null;
  }
  function showTooltip(hit) {
    tooltip.replaceChildren();
    const { lane } = hit;
    if (hit.curve) {
      tooltip.appendChild(el("div", "gt-tip-title", lane.label));
      line(tooltip, "at", fmtTime(hit.t));
      line(tooltip, "value", fmtNumber(hit.v, 3) + " " + lane.unit);
    } else if (hit.exact !== undefined) {
      const d = hit.d, i = hit.exact;
      const name = d.name[i] >= 0 ? names[d.name[i]] : kinds[d.kind[i]].name;
      tooltip.appendChild(el("div", "gt-tip-title", name));
      line(tooltip, "type", kinds[d.kind[i]].name);
      line(tooltip, "start", fmtTime(d.start[i]));
      line(tooltip, "duration", fmtTime(d.dur[i]));
      const step = stepOf(d.start[i]);
      if (step !== null) line(tooltip, "step", String(step));
      if (lane.rank !== null && lane.rank !== undefined) line(tooltip, "rank", String(lane.rank));
      const ref = d.ref[i];
      if (ref >= 0) {
        const box = el("div", "gt-tip-details");
        tooltip.appendChild(box);
        const fill = (fields) => { // two (key, value) pairs a row: the grid of .gt-tip-details
          box.replaceChildren();
          for (const [k, v] of fields) {
            if (k === "Op Name" || k === "Task Type") continue;
            box.append(el("span", "gt-tip-key", k), el("span", "gt-tip-value", v));
          }
          place();
        };
        if (state.details.has(ref)) fill(state.details.get(ref));
        else {
          box.textContent = "…";
          ask({ type: "detail", ref }, (reply) => {
            if (reply.type !== "detail") { box.textContent = reply.message || ""; return; }
            state.details.set(ref, reply.fields);
            if (state.hover && state.hover.ref === ref) fill(reply.fields);
          });
        }
      }
      state.hover = { ref };
    } else {
      const d = hit.d, j = hit.column;
      const cw = state.data.cw;
      const per = lane.type === "summary" ? d.members : 1;
      tooltip.appendChild(el("div", "gt-tip-title", lane.label));
      line(tooltip, "at", fmtTime(state.data.t0 + d.col[j] * cw) + " (" + fmtTime(cw) + " wide)");
      const merged = lane.type === "summary" ? "" : " merged (zoom in to tell apart)";
      line(tooltip, "tasks", fmtNumber(d.count[j], 0) + merged);
      line(tooltip, "busy", fmtTime(d.busy[j]) + " (" + fmtNumber((100 * d.busy[j]) / (cw * per), 1) + "%" +
        (per > 1 ? " of " + per + " lanes" : "") + ")");
      line(tooltip, "mostly", kinds[d.ckind[j]].name);
    }
    tooltip.style.display = "block";
    place();
  }
  // beside the cursor, inside the lanes' box (above the cursor when there is no room below)
  function place() {
    const m = state.lastMouse || { x: 0, y: 0 };
    const mw = main.clientWidth, tw = tooltip.offsetWidth, th = tooltip.offsetHeight;
    const x = m.x + 14 + tw <= mw ? m.x + 14 : Math.max(0, m.x - 14 - tw);
    const below = m.y + 14 + th <= state.height;
    tooltip.style.left = x + "px";
    tooltip.style.top = Math.max(0, below ? m.y + 14 : Math.max(0, Math.min(m.y - 14 - th, state.height - th))) + "px";
  }
  function hideTooltip() { tooltip.style.display = "none"; state.hover = null; }

  // ---- the op panel
  function showOp(name) {
    state.selected = names.indexOf(name);
    panel.style.display = "block";
    panel.replaceChildren(el("div", "gt-panel-loading", "loading " + name + " …"));
    redraw();
    ask({ type: "op", name }, (reply) => {
      panel.replaceChildren();
      const head = el("div", "gt-panel-head");
      const close = el("button", "gt-panel-close", "×");
      close.title = "close";
      close.onclick = () => { panel.style.display = "none"; state.selected = null; redraw(); };
      head.append(el("div", "gt-panel-title", name), close);
      panel.appendChild(head);
      if (reply.type !== "op") { panel.appendChild(el("div", "gt-error", reply.message || "")); return; }
      const stats = el("table", "gt-stats");
      const s = reply.stats;
      const add = (table, k, v) => {
        const tr = el("tr");
        tr.append(el("th", "", k), el("td", "", v));
        table.appendChild(tr);
      };
      add(stats, "instances", fmtNumber(reply.count, 0));
      if (s) {
        add(stats, "total", fmtTime(s.total));
        add(stats, "mean", fmtTime(s.mean));
        add(stats, "min", fmtTime(s.min));
        add(stats, "max", fmtTime(s.max));
      }
      panel.appendChild(stats);
      if (reply.ratios.length) {
        panel.appendChild(el("div", "gt-panel-sub", "PMU ratios (mean over instances)"));
        const rt = el("table", "gt-ratios");
        for (const [k, v] of reply.ratios) add(rt, k, fmtNumber(v, 3));
        panel.appendChild(rt);
      }
      const shown = reply.instances.length;
      panel.appendChild(el("div", "gt-panel-sub", shown < reply.count ? "the first " + shown + " of " +
        fmtNumber(reply.count, 0) + " instances (click one to zoom to it)" : "instances (click one to zoom to it)"));
      const it = el("table", "gt-instances");
      const hr = el("tr");
      const cols = meta.cluster ? ["rank", "step", "start", "duration"] : ["step", "start", "duration"];
      for (const c of cols) hr.appendChild(el("th", "", c));
      it.appendChild(hr);
      for (const [rank, step, start, dur] of reply.instances) {
        const tr = el("tr", "gt-instance");
        const cells = meta.cluster ? [String(rank), String(step), fmtTime(start), fmtTime(dur)]
          : [String(step), fmtTime(start), fmtTime(dur)];
        for (const c of cells) tr.appendChild(el("td", "", c));
        tr.onclick = () => { const pad = Math.max(dur * 4, 1); setWindow(start - pad, start + dur + pad, true); };
        it.appendChild(tr);
      }
      panel.appendChild(it);
    });
  }

  // ---- events
  const input = (e) => { if (state.inputAt === null) state.inputAt = e.timeStamp; };
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    input(e);
    if (e.shiftKey) { scroller.scrollTop += e.deltaY; return; }
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left;
    const t = x >= LABEL_WIDTH ? tOf(x) : (state.t0 + state.t1) / 2;
    const delta = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY;
    zoomAt(t, Math.exp(Math.max(-300, Math.min(300, delta)) * 0.0025));
  }, { passive: false });
  scroller.addEventListener("scroll", () => { state.scrollTop = scroller.scrollTop; draw(); });
  canvas.addEventListener("mousedown", (e) => {
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    root.focus({ preventScroll: true });
    if (x < LABEL_WIDTH) {
      const row = rowAt(y);
      if (row && row.lane.expandable) {
        if (expanded.has(row.lane.id)) expanded.delete(row.lane.id); else expanded.add(row.lane.id);
        draw();
        if (!covered()) schedule(0);
      }
      return;
    }
    state.drag = { x, t0: state.t0, t1: state.t1, moved: false };
    e.preventDefault();
  });
  window.addEventListener("mousemove", onMove);
  window.addEventListener("mouseup", onUp);
  function onMove(e) {
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    state.lastMouse = { x, y };
    if (state.drag) {
      const dx = x - state.drag.x;
      if (Math.abs(dx) > 2) state.drag.moved = true;
      if (state.drag.moved) {
        input(e);
        const dt = (dx / trackWidth()) * (state.drag.t1 - state.drag.t0);
        hideTooltip();
        setWindow(state.drag.t0 - dt, state.drag.t1 - dt);
        canvas.style.cursor = "grabbing";
      }
      return;
    }
    if (x < 0 || y < 0 || x > state.width || y > state.height) { hideTooltip(); return; }
    const hit = y > AXIS_HEIGHT ? hitAt(x, y) : null;
    if (hit) showTooltip(hit); else hideTooltip();
  }
  function onUp(e) {
    if (!state.drag) return;
    const drag = state.drag;
    state.drag = null;
    canvas.style.cursor = "";
    if (drag.moved) return;
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    const hit = hitAt(x, y);
    if (!hit || hit.exact === undefined) return;
    const d = hit.d, i = hit.exact;
    if (hit.lane.ops && d.name[i] >= 0) showOp(names[d.name[i]]);
    else if (hit.lane.id.endsWith("steps")) setWindow(d.start[i], d.start[i] + d.dur[i], true);
  }
  root.addEventListener("keydown", (e) => {
    if (e.target === search || e.target === stepSelect) return;
    const key = e.key.toLowerCase();
    if (!["w", "a", "s", "d"].includes(key) || e.ctrlKey || e.metaKey || e.altKey) return;
    e.preventDefault();
    e.stopPropagation();
    input(e);
    const span = state.t1 - state.t0;
    const m = state.lastMouse;
    const t = m && m.x >= LABEL_WIDTH && m.x <= state.width ? tOf(m.x) : (state.t0 + state.t1) / 2;
    if (key === "w") zoomAt(t, 0.8);
    else if (key === "s") zoomAt(t, 1.25);
    else if (key === "a") setWindow(state.t0 - 0.15 * span, state.t1 - 0.15 * span);
    else setWindow(state.t0 + 0.15 * span, state.t1 + 0.15 * span);
  });
  let searchTimer = null;
  search.addEventListener("input", () => {
    if (searchTimer) clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      const q = search.value.trim();
      state.query = q;
      if (!q) { state.hits = null; searchResult.textContent = ""; schedule(0); redraw(); return; }
      ask({ type: "search", query: q }, (reply) => {
        if (reply.type !== "search" || reply.query !== state.query) return;
        state.hits = new Set(reply.names.map(([code]) => code));
        searchResult.textContent = fmtNumber(reply.ops, 0) + " ops, " + fmtNumber(reply.tasks, 0) + " tasks";
        root.dataset.searchTasks = String(reply.tasks);
        schedule(0);
        redraw();
      });
    }, 150);
  });
  search.addEventListener("keydown", (e) => e.stopPropagation());
  stepSelect.addEventListener("change", () => {
    if (stepSelect.value === "all") { setWindow(extent[0], extent[1], true); return; }
    const found = meta.steps.find(([s]) => String(s) === stepSelect.value);
    if (found) setWindow(found[1], found[2], true);
  });
  reset.addEventListener("click", () => { stepSelect.value = "all"; setWindow(extent[0], extent[1], true); });
  model.on("change:window", () => {
    if (syncTimer) return; // our own change is on its way: the view has moved on since
    const [a, b] = model.get("window");
    if (Math.abs(a - state.t0) > 1e-9 || Math.abs(b - state.t1) > 1e-9) setWindow(a, b, true);
  });
  model.on("change:height", () => { resize(); draw(); });
  const observer = new ResizeObserver(() => {
    const w = Math.floor(main.clientWidth);
    if (w && w !== state.width) { resize(); draw(); if (!covered()) schedule(0); }
  });
  observer.observe(main);

  // first frame: the axis and labels at once, the data as soon as the kernel answers
  resize();
  draw();
  request();

  return () => {
    observer.disconnect();
    window.removeEventListener("mousemove", onMove);
    window.removeEventListener("mouseup", onUp);
    model.off("msg:custom", onMessage);
  };
}

function kindCode(meta, name) {
  if (!meta._kindIndex) meta._kindIndex = Object.fromEntries(meta.kinds.map((k, i) => [k.name, i]));
  return meta._kindIndex[name];
}

export default { render };
