// Charts (uPlot) and the panel element that carries the testability
// contract: data-panel, data-state, data-series, data-tiers.
import { html } from "htm/preact";
import { createContext } from "preact";
import { useContext, useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import { alignedEnd, api, chooseStep, combine, fmt, fmtTime, histogramQuantile, isAbort, legendFor, num, promDur, quantileCall, rateInterval, splitBinary, substitute } from "./util.js";

// PageCtx carries what every panel of a page shares: the time range, the
// page's selector, scrape interval, annotations, theme, a refresh tick
// and the zoom callback.
export const PageCtx = createContext(null);

export const MAX_SERIES = 20;
const PALETTE = ["#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#06b6d4", "#ec4899", "#84cc16", "#f97316", "#6366f1",
  "#14b8a6", "#eab308", "#a855f7", "#22c55e", "#e11d48", "#0ea5e9", "#d946ef", "#65a30d", "#fb923c", "#64748b"];
const SEVERITY = { P0: "rgba(220,38,38,0.22)", P1: "rgba(234,88,12,0.18)", P2: "rgba(202,138,4,0.14)" };
const WARMUP = "rgba(99,102,241,0.16)";
const MARKS = { restart: "#dc2626", release: "#2563eb", note: "#6b7280" };
const NAMED = { red: "#dc2626", amber: "#d97706", orange: "#ea580c", yellow: "#ca8a04", green: "#16a34a", blue: "#2563eb" };
const color = (c) => NAMED[c] || c || NAMED.red;

const cssVar = (n) => getComputedStyle(document.documentElement).getPropertyValue(n).trim();

// queryVars are the placeholder values for a panel of the given width.
export function queryVars(ctx, width, sel) {
  const range = ctx.end - ctx.start;
  const step = chooseStep(range, width, ctx.scrape);
  return { step, range, rate: rateInterval(step, ctx.scrape), sel: sel ?? ctx.sel };
}

// rangeQuery runs one query_range and aligns its series on the step grid;
// parse reads each value (num: NaN and ±Inf read as null, a gap).
export async function rangeQuery(expr, start, end, step, signal, parse = num) {
  // The grid sits on multiples of the step (as Grafana aligns it), so the
  // next load, a refresh or another page asks for the same points and the
  // server answers the past ones from its range cache (ui/rangecache).
  // Its last point is the last multiple at or before the range's end, at
  // most one step old. When the grid holds no value at all and ends a
  // minute or more before the end (a fresh install: all its data is
  // younger than a step), the value at the end comes from a one-point
  // query_range at the same step (the grid's tiers), drawn as one more
  // point. Asking for it on every load would cost a query evaluated
  // afresh per panel: the work of a range query follows the series read,
  // not the steps.
  const now = Math.round(end), e = alignedEnd(end, step), s = e - Math.ceil((end - start) / step) * step;
  const { data, tiers } = await api("/api/v1/query_range", { query: expr, start: s, end: e, step }, { signal });
  const n = Math.round((e - s) / step) + 1;
  const xs = Array.from({ length: n }, (_, i) => s + i * step);
  const grid = (data.result || []).map((r) => {
    const ys = new Array(n).fill(null);
    for (const [t, v] of r.values || []) ys[Math.round((t - s) / step)] = parse(v);
    return { metric: r.metric, ys };
  });
  if (step < 60 || now <= e || grid.some((g) => g.ys.some((v) => v != null))) return { xs, series: grid, tiers };
  const last = await api("/api/v1/query_range", { query: expr, start: now, end: now, step }, { signal });
  xs.push(now);
  const series = [];
  for (const r of last.data.result || []) {
    const v = (r.values || []).at(-1);
    if (!v) continue;
    const ys = new Array(xs.length).fill(null);
    ys[xs.length - 1] = parse(v[1]);
    series.push({ metric: r.metric, ys });
  }
  const order = ["raw", "1m", "5m"];
  return { xs, series, tiers: [...new Set([...tiers, ...last.tiers])].sort((a, b) => order.indexOf(a) - order.indexOf(b)) };
}

// sharedRange is rangeQuery through the page's map of range answers
// (ctx.queries, new for every range and refresh):
//   - histogram_quantile(q, sum by (le) (...)) is computed in the page
//     from the `sum by (le)` answer, fetched once for all the quantiles
//     the page asks of that histogram (the Overview's P50/P95/P99): one
//     evaluation of the histogram on the server instead of one per
//     quantile, and the same numbers (histogramQuantile is Prometheus'
//     algorithm in the same float64 arithmetic);
//   - an expression "A - B" or "A / B" whose A and B another panel of the
//     page has asked for on the same grid is combined from their answers
//     (the Overview's P95-P50 gap and P95/P50 ratio from its quantile
//     panel) instead of the server evaluating both histograms again.
// Anything else, or a failed or aborted shared answer, goes to the server.
export function sharedRange(queries, expr, start, end, step, signal) {
  const k = (x) => [x, start, end, step].join("\u0000");
  const own = () => rangeQuery(expr, start, end, step, signal);
  if (!queries) return own();
  const hq = quantileCall(expr);
  if (hq) {
    const ik = "buckets\u0000" + k(hq.inner);
    if (!queries.has(ik)) {
      const b = rangeQuery(hq.inner, start, end, step, signal, parseFloat);
      b.catch(() => {});
      queries.set(ik, b);
    }
    const p = queries.get(ik)
      .then((b) => histogramQuantile(hq.q, b) || own())
      .catch((e) => (signal.aborted ? Promise.reject(e) : own()));
    queries.set(k(expr), p);
    p.catch(() => {});
    return p;
  }
  const parts = splitBinary(expr);
  if (parts && queries.has(k(parts.a)) && queries.has(k(parts.b))) {
    return Promise.all([queries.get(k(parts.a)), queries.get(k(parts.b))])
      .then(([a, b]) => combine(parts.op, a, b) || own())
      .catch((e) => (signal.aborted ? Promise.reject(e) : own()));
  }
  const p = own();
  queries.set(k(expr), p);
  p.catch(() => {}); // a failure is the asking panel's; others fall back
  return p;
}

export async function instantQuery(expr, time, signal) {
  const { data, tiers } = await api("/api/v1/query", { query: expr, time }, { signal });
  let result = data.result;
  if (data.resultType === "scalar" || data.resultType === "string") result = [{ metric: {}, value: data.result }];
  return { result: result || [], tiers };
}

// emptyReason tells "target down" and "idle" from "no data".
async function emptyReason(sel, time, signal) {
  try {
    const { result } = await instantQuery(`max(up{${sel || ""}})`, time, signal);
    if (!result.length) return "no data";
    return num(result[0].value[1]) === 0 ? "target down" : "idle: no traffic in this range";
  } catch { return "no data"; }
}

function mergeTiers(list) {
  const order = ["raw", "1m", "5m"], set = new Set(list.flat());
  return order.filter((t) => set.has(t)).concat([...set].filter((t) => !order.includes(t))).join(",");
}

// Panel fetches a dashboard panel's queries and draws it.
export function Panel({ id, panel, sel }) {
  const ctx = useContext(PageCtx);
  const box = useRef(null);
  const [st, setSt] = useState({ state: "loading" });
  const [showAll, setShowAll] = useState(false);
  const key = JSON.stringify([panel.queries, sel, ctx.rangeKey]);
  const lastKey = useRef("");
  // A layout effect: the queries go out as the panel is laid out, not a
  // frame later after the first paint.
  useLayoutEffect(() => {
    if (!ctx.scrapeKnown) return undefined;
    const ac = new AbortController();
    const width = box.current ? box.current.clientWidth - 20 : 600;
    const v = queryVars(ctx, width, sel);
    if (lastKey.current !== key) setSt({ state: "loading" });
    lastKey.current = key;
    const instant = panel.kind === "stat" || panel.kind === "table" || panel.kind === "status";
    const run = (q) => instant
      ? instantQuery(substitute(q.expr, v), ctx.end, ac.signal)
      : sharedRange(ctx.queries, substitute(q.expr, v), ctx.start, ctx.end, v.step, ac.signal);
    Promise.all(panel.queries.map(run)).then(async (answers) => {
      const tiers = mergeTiers(answers.map((a) => a.tiers));
      if (instant) {
        const rows = answers.flatMap((a, i) => a.result.map((r) => ({ name: legendFor(panel.queries[i].legend, r.metric), metric: r.metric, v: num(r.value[1]) })));
        if (!rows.length) return setSt({ state: "empty", reason: await emptyReason(v.sel, ctx.end, ac.signal) });
        return setSt({ state: "ready", rows, tiers });
      }
      const xs = answers[0].xs;
      const series = answers.flatMap((a, i) => a.series.map((s) => ({ ...s, name: legendFor(panel.queries[i].legend, s.metric) })));
      if (!series.length) return setSt({ state: "empty", reason: await emptyReason(v.sel, ctx.end, ac.signal) });
      setSt({ state: "ready", xs, series, step: v.step, tiers });
    }).catch((e) => { if (!isAbort(e)) setSt({ state: "error", error: e.message }); });
    return () => ac.abort();
  }, [key, ctx.tick, ctx.scrapeKnown]);

  // A new range or query is loading from the render that asks for it, so
  // the page's data-ready never sees the old answer as the new one.
  const state = lastKey.current !== key ? "loading" : st.state;
  let body, drawn = 0;
  if (state === "loading") body = html`<div class="msg">loading…</div>`;
  else if (st.state === "error") body = html`<div class="msg err">${st.error}</div>`;
  else if (st.state === "empty") body = html`<div class="msg">${st.reason}</div>`;
  else if (st.rows) {
    drawn = st.rows.length;
    body = panel.kind === "table" ? html`<${Table} rows=${st.rows} unit=${panel.unit} />` : html`<${Stat} rows=${st.rows} panel=${panel} />`;
  } else if (panel.kind === "heatmap" || isHeatmap(st.series)) {
    drawn = st.series.length;
    body = html`<${Heatmap} xs=${st.xs} series=${st.series} step=${st.step} panel=${panel} />`;
  } else {
    const shown = showAll ? st.series : st.series.slice(0, MAX_SERIES);
    drawn = shown.length;
    body = html`<${TimeChart} xs=${st.xs} series=${shown} panel=${panel} step=${st.step} />
      ${st.series.length > MAX_SERIES && html`<button class="link" onClick=${() => setShowAll(!showAll)}>${showAll ? `show first ${MAX_SERIES}` : `show all ${st.series.length} series`}</button>`}`;
  }
  const attrs = state === "ready" ? { "data-series": String(drawn), "data-tiers": st.tiers } : {};
  return html`<section class=${"panel " + (panel.kind === "stat" || panel.kind === "status" ? "small" : "")} ref=${box} data-panel=${id} data-state=${state} ...${attrs}>
    <header><h3 title=${panel.description || ""}>${panel.title}</h3>${st.tiers && html`<span class="tier" title="tiers that answered">${st.tiers}</span>`}</header>
    ${body}
  </section>`;
}

export const isHeatmap = (series) => series.length > 1 && series.every((s) => s.metric.le !== undefined);

function colorFor(panel, v) {
  let c = null;
  for (const t of panel.thresholds || []) if (v >= t.value) c = t.color;
  if (panel.kind === "status" && c == null) c = v > 0 ? "green" : "red";
  return c;
}

function Stat({ rows, panel }) {
  return html`<div class="stats">${rows.slice(0, 12).map((r) => html`<div class=${"stat " + (colorFor(panel, r.v) || "")}>
    <div class="val">${fmt(r.v, panel.unit)}</div>${rows.length > 1 && html`<div class="lbl">${r.name}</div>`}</div>`)}</div>`;
}

function Table({ rows, unit }) {
  const keys = [...new Set(rows.flatMap((r) => Object.keys(r.metric)))].sort();
  return html`<div class="scroll"><table><thead><tr>${keys.map((k) => html`<th>${k}</th>`)}<th>value</th></tr></thead>
    <tbody>${rows.slice(0, 100).map((r) => html`<tr>${keys.map((k) => html`<td>${r.metric[k] ?? ""}</td>`)}<td class="num">${fmt(r.v, unit)}</td></tr>`)}</tbody></table></div>`;
}

// drawBands shades warm-up spans and firing alerts under the series.
function drawBands(u, anns) {
  const { ctx: c, bbox } = u;
  c.save();
  for (const a of anns) {
    if (a.kind !== "warmup" && a.kind !== "alert") continue;
    const x0 = Math.max(bbox.left, u.valToPos(a.time, "x", true));
    const x1 = Math.min(bbox.left + bbox.width, u.valToPos(a.end || a.time, "x", true));
    if (x1 <= x0) continue;
    c.fillStyle = a.kind === "warmup" ? WARMUP : SEVERITY[a.severity] || SEVERITY.P2;
    c.fillRect(x0, bbox.top, Math.max(1, x1 - x0), bbox.height);
  }
  c.restore();
}

// drawMarks draws restarts, releases and posted notes as dashed lines
// (red, blue, grey), and threshold lines.
function drawMarks(u, anns, thresholds) {
  const { ctx: c, bbox } = u;
  c.save();
  c.setLineDash([4, 3]);
  c.lineWidth = 1.5 * devicePixelRatio;
  for (const a of anns) {
    if (!MARKS[a.kind]) continue;
    const x = u.valToPos(a.time, "x", true);
    if (x < bbox.left || x > bbox.left + bbox.width) continue;
    c.strokeStyle = MARKS[a.kind];
    c.beginPath(); c.moveTo(x, bbox.top); c.lineTo(x, bbox.top + bbox.height); c.stroke();
  }
  for (const t of thresholds || []) {
    const y = u.valToPos(t.value, "y", true);
    if (y < bbox.top || y > bbox.top + bbox.height) continue;
    c.strokeStyle = color(t.color);
    c.beginPath(); c.moveTo(bbox.left, y); c.lineTo(bbox.left + bbox.width, y); c.stroke();
  }
  c.restore();
}

// axisTime labels the x axis: the clock within two days, the date and
// clock within two weeks, the date beyond.
function axisTime(sec, range) {
  const d = new Date(sec * 1000), p = (n) => String(n).padStart(2, "0");
  const clock = `${p(d.getHours())}:${p(d.getMinutes())}`, day = `${p(d.getMonth() + 1)}-${p(d.getDate())}`;
  if (range <= 2 * 86400) return range <= 600 ? `${clock}:${p(d.getSeconds())}` : clock;
  return range <= 14 * 86400 ? `${day} ${clock}` : day;
}

function baseOpts(ctx, width, unit) {
  const fg = cssVar("--fg"), grid = cssVar("--grid");
  const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  // The y axis is as wide as its longest label.
  const ysize = (u, values) => (values && values.length ? Math.ceil(Math.max(...values.map((v) => u.ctx.measureText(v).width)) / devicePixelRatio) + 18 : 40);
  return {
    width, height: 200,
    cursor: { sync: { key: ctx.syncKey }, drag: { x: true, y: false, setScale: false } },
    select: { show: true },
    legend: { isolate: true },
    axes: [{ ...axis, values: (u, splits) => splits.map((v) => axisTime(v, ctx.end - ctx.start)) }, { ...axis, size: ysize, values: (u, splits) => splits.map((v) => fmt(v, unit)) }],
    hooks: {
      setSelect: [(u) => {
        if (u.select.width < 4) return;
        const a = u.posToVal(u.select.left, "x"), b = u.posToVal(u.select.left + u.select.width, "x");
        u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
        ctx.onZoom(a, b);
      }],
    },
  };
}

// useUplot creates the chart once per (options key) and resizes it with
// its container.
function useUplot(make, deps) {
  const el = useRef(null);
  useEffect(() => {
    const node = el.current;
    const u = make(node.clientWidth || 600, node);
    const ro = new ResizeObserver(() => u.setSize({ width: node.clientWidth || 600, height: 200 }));
    ro.observe(node);
    return () => { ro.disconnect(); u.destroy(); };
  }, deps);
  return el;
}

export function TimeChart({ xs, series, panel, step }) {
  const ctx = useContext(PageCtx);
  const el = useUplot((width, node) => {
    let ys = series.map((s) => s.ys);
    if (panel.stack) {
      const acc = new Array(xs.length).fill(0);
      ys = ys.map((y) => y.map((v, i) => (v == null ? null : (acc[i] += v))));
    }
    const opts = baseOpts(ctx, width, panel.unit);
    opts.series = [{ value: (u, v) => (v == null ? "" : fmtTime(v)) }, ...series.map((s, i) => ({
      label: s.name, stroke: PALETTE[i % PALETTE.length], width: 1.5,
      fill: panel.stack ? PALETTE[i % PALETTE.length] + "55" : undefined,
      spanGaps: false, points: { show: false }, value: (u, v) => fmt(v, panel.unit),
    }))];
    // A flat series (all 0, as an error ratio without errors) gets a
    // range that fits its unit rather than uPlot's 0..100.
    const flat = { ratio: 1, percent: 100 }[panel.unit] || 1;
    opts.scales = {
      x: { time: true, range: () => [ctx.start, ctx.end] },
      y: { range: (u, min, max) => (min == null || min === max ? [Math.min(0, min || 0), Math.max(flat, (max || 0) * 1.2)] : uPlot.rangeNum(min, max, 0.1, true)) },
    };
    opts.hooks.drawAxes = [(u) => drawBands(u, ctx.annotations)];
    opts.hooks.draw = [(u) => drawMarks(u, ctx.annotations, panel.thresholds)];
    return new uPlot(opts, [xs, ...ys], node);
  }, [xs, series, ctx.theme, ctx.annotations, panel.stack]);
  return html`<div class="chart" ref=${el}></div>`;
}

// Heatmap de-cumulates the per-le series (rates or increases of the
// cumulative buckets) into per-bucket counts, one row per bound with the
// +Inf row kept, and draws each colour level as one batched path.
function Heatmap({ xs, series, panel }) {
  const ctx = useContext(PageCtx);
  const read = useRef(null);
  const bounds = series.map((s) => ({ le: s.metric.le, n: s.metric.le === "+Inf" ? Infinity : parseFloat(s.metric.le), ys: s.ys }))
    .sort((a, b) => a.n - b.n);
  const cells = bounds.map((b, i) => b.ys.map((v, j) => {
    if (v == null) return null;
    const prev = i > 0 ? bounds[i - 1].ys[j] : 0;
    return Math.max(0, v - (prev || 0));
  }));
  const max = Math.max(0, ...cells.flat().filter((v) => v != null));
  const el = useUplot((width, node) => {
    const opts = baseOpts(ctx, width, "short");
    const labels = bounds.map((b) => b.le);
    const every = Math.max(1, Math.ceil(labels.length / 8));
    opts.axes[1] = { ...opts.axes[1], splits: () => labels.map((_, i) => i + 0.5).filter((_, i) => i % every === 0), values: (u, sp) => sp.map((s) => labels[Math.floor(s)]) };
    opts.series = [{}, { label: panel.title, stroke: "transparent", points: { show: false } }];
    opts.legend = { show: false };
    opts.scales = { x: { time: true, range: () => [ctx.start, ctx.end] }, y: { range: () => [0, labels.length] } };
    opts.hooks.drawAxes = [(u) => drawBands(u, ctx.annotations)];
    opts.hooks.draw = [(u) => {
      const c = u.ctx, levels = 16, paths = Array.from({ length: levels }, () => new Path2D());
      const step = xs.length > 1 ? xs[1] - xs[0] : 60;
      for (let i = 0; i < cells.length; i++) {
        const y0 = u.valToPos(i + 1, "y", true), y1 = u.valToPos(i, "y", true);
        for (let j = 0; j < xs.length; j++) {
          const v = cells[i][j];
          if (!v || max <= 0) continue;
          const x0 = u.valToPos(xs[j] - step / 2, "x", true), x1 = u.valToPos(xs[j] + step / 2, "x", true);
          paths[Math.min(levels - 1, Math.floor((v / max) * levels))].rect(x0, y0, Math.max(1, x1 - x0), Math.max(1, y1 - y0));
        }
      }
      c.save();
      c.beginPath();
      c.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
      c.clip();
      paths.forEach((p, l) => { c.fillStyle = `hsla(${220 - l * 12},85%,${55 - l}%,${0.25 + (0.75 * l) / levels})`; c.fill(p); });
      for (const t of panel.thresholds || []) {
        const k = bounds.findIndex((b) => b.n >= t.value);
        if (k < 0) continue;
        const y = u.valToPos(k + 1, "y", true);
        c.strokeStyle = color(t.color); c.setLineDash([4, 3]); c.lineWidth = 1.5 * devicePixelRatio;
        c.beginPath(); c.moveTo(u.bbox.left, y); c.lineTo(u.bbox.left + u.bbox.width, y); c.stroke();
      }
      c.restore();
      drawMarks(u, ctx.annotations, []);
    }];
    opts.hooks.setCursor = [(u) => {
      const { idx, top } = u.cursor;
      if (idx == null || top == null || top < 0 || !read.current) return;
      const i = Math.floor(u.posToVal(top, "y"));
      if (i < 0 || i >= bounds.length) return;
      const lo = i === 0 ? "0" : bounds[i - 1].le;
      read.current.textContent = `${fmtTime(xs[idx])}  (${lo}, ${bounds[i].le}]  ${fmt(cells[i][idx], "short")}`;
    }];
    return new uPlot(opts, [xs, xs.map(() => null)], node);
  }, [xs, series, ctx.theme, ctx.annotations]);
  return html`<div class="chart" ref=${el}></div><div class="readout" ref=${read}>${bounds.length} buckets, de-cumulated; step ${promDur(xs[1] - xs[0] || 60)}</div>`;
}

// ResultChart draws an ad-hoc query result (Explore): a heatmap when
// every series has le, otherwise lines.
export function ResultChart({ xs, series, step }) {
  const panel = { title: "result", unit: "short", kind: isHeatmap(series) ? "heatmap" : "timeseries" };
  return panel.kind === "heatmap"
    ? html`<${Heatmap} xs=${xs} series=${series} step=${step} panel=${panel} />`
    : html`<${TimeChart} xs=${xs} series=${series} step=${step} panel=${panel} />`;
}
