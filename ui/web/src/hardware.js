// The temperature-vs-latency overlay of /hardware: the box's
// temperatures and the model's inference P95 on one chart with two axes,
// the throttle thresholds drawn, the throttle spans shaded; for
// detection-style workloads (one inference per frame) the frame rate and
// the frame-time jitter (P99 − P50). One answer of
// /api/v1/appliance/thermal feeds the three panels.
import { html } from "htm/preact";
import { useContext, useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import { PageCtx, TimeChart } from "./chart.js";
import { stackable } from "./comparemath.js";
import { useAPI } from "./pages.js";
import { chooseStep, fmt, fmtTime } from "./util.js";

const TEMP_COLORS = ["#ef4444", "#f97316", "#f59e0b", "#ec4899", "#a855f7", "#84cc16", "#06b6d4", "#8b5cf6"];
const LATENCY = "#2563eb";
const THROTTLE = "rgba(239,68,68,0.14)";

const cssVar = (n) => getComputedStyle(document.documentElement).getPropertyValue(n).trim();

// rows turns [{name, points: [[t, v]]}] into stackable's {xs, series}.
const rows = (list) => stackable(list.map((s) => ({ name: s.name, mean: s.points })));

// DualChart draws temperatures (°C, left axis) and the latency (s, right
// axis) over one time axis, the thresholds as dashed lines on the left
// scale and the throttle spans shaded.
function DualChart({ r }) {
  const ctx = useContext(PageCtx);
  const el = useRef(null);
  useEffect(() => {
    const node = el.current;
    const all = [...r.temperatures, ...(r.latency ? [r.latency] : [])];
    const { xs, series } = rows(all);
    const fg = cssVar("--fg"), grid = cssVar("--grid");
    const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const nt = r.temperatures.length;
    const temps = series.slice(0, nt).flatMap((s) => s.ys).filter((v) => v != null);
    const hi = Math.max(...temps, ...r.thresholds.map((t) => t.value)) + 5;
    const lo = Math.min(...temps, ...r.thresholds.map((t) => t.value)) - 10;
    // Each y axis as wide as its longest label; the clock with seconds
    // within ten minutes.
    const size = (u, values) => (values && values.length ? Math.ceil(Math.max(...values.map((v) => u.ctx.measureText(v).width)) / devicePixelRatio) + 18 : 40);
    const clock = (v) => (ctx.end - ctx.start <= 600 ? fmtTime(v).slice(-8) : fmtTime(v).slice(-8, -3));
    const opts = {
      width: node.clientWidth || 800, height: 260,
      cursor: { sync: { key: ctx.syncKey } },
      legend: { isolate: true },
      scales: { x: { time: true, range: () => [ctx.start, ctx.end] }, c: { range: () => [Math.floor(lo / 5) * 5, Math.ceil(hi / 5) * 5] }, s: { range: (u, min, max) => [0, Math.max(max || 0, 0.001) * 1.2] } },
      axes: [
        { ...axis, values: (u, sp) => sp.map(clock) },
        { ...axis, scale: "c", size, values: (u, sp) => sp.map((v) => fmt(v, "celsius")) },
        { ...axis, scale: "s", side: 1, size, grid: { show: false }, values: (u, sp) => sp.map((v) => fmt(v, "s")) },
      ],
      series: [{ value: (u, v) => (v == null ? "" : fmtTime(v)) }, ...series.map((s, i) => (i < nt
        ? { label: s.name, scale: "c", stroke: TEMP_COLORS[i % TEMP_COLORS.length], width: 1.5, points: { show: false }, value: (u, v) => fmt(v, "celsius") }
        : { label: s.name, scale: "s", stroke: LATENCY, width: 2, dash: [6, 3], points: { show: false }, value: (u, v) => fmt(v, "s") }))],
      hooks: {
        drawAxes: [(u) => {
          const c = u.ctx, { bbox } = u;
          c.save();
          c.fillStyle = THROTTLE;
          for (const sp of r.throttle) {
            const x0 = Math.max(bbox.left, u.valToPos(sp.from, "x", true)), x1 = Math.min(bbox.left + bbox.width, u.valToPos(sp.to, "x", true));
            if (x1 > x0) c.fillRect(x0, bbox.top, x1 - x0, bbox.height);
          }
          c.restore();
        }],
        draw: [(u) => {
          const c = u.ctx, { bbox } = u;
          c.save();
          c.setLineDash([4, 3]);
          c.lineWidth = 1.5 * devicePixelRatio;
          c.strokeStyle = "#dc2626";
          for (const t of r.thresholds) {
            const y = u.valToPos(t.value, "c", true);
            if (y < bbox.top || y > bbox.top + bbox.height) continue;
            c.beginPath(); c.moveTo(bbox.left, y); c.lineTo(bbox.left + bbox.width, y); c.stroke();
          }
          c.restore();
        }],
      },
    };
    const u = new uPlot(opts, [xs, ...series.map((s) => s.ys)], node);
    const ro = new ResizeObserver(() => u.setSize({ width: node.clientWidth || 800, height: 260 }));
    ro.observe(node);
    return () => { ro.disconnect(); u.destroy(); };
  }, [r, ctx.theme]);
  return html`<div class="chart" ref=${el}></div>`;
}

function section(id, title, state, drawn, body, extra = {}) {
  const attrs = state === "ready" ? { "data-series": String(drawn), "data-tiers": "", ...extra } : {};
  return html`<section class="panel wide" data-panel=${id} data-state=${state} ...${attrs}><header><h3>${title}</h3></header>${body}</section>`;
}

// ThermalPanels are the overlay's panels, above the hardware dashboard.
export function ThermalPanels({ p }) {
  const ctx = useContext(PageCtx);
  const qs = { from: Math.floor(ctx.start), to: Math.floor(ctx.end), step: chooseStep(ctx.end - ctx.start, 900, ctx.scrape) };
  for (const k of ["job", "model", "instance", "metric", "match", "frames"]) if (p.get(k)) qs[k] = p.get(k);
  const st = useAPI("/api/v1/appliance/thermal", qs, []);
  const loading = html`<div class="msg">loading…</div>`;
  if (st.state !== "ready") {
    const body = st.state === "error" ? html`<div class="msg err">${st.error}</div>` : loading;
    return section("temp_latency", "Temperature vs inference latency", st.state, 0, body);
  }
  const r = st.data;
  const has = (s) => s && s.points.some((q) => q[1] != null);
  const lines = r.temperatures.filter(has).length + (has(r.latency) ? 1 : 0);
  const throttled = r.throttle.length ? `${r.throttle.length} throttle span(s), shaded: ${[...new Set(r.throttle.map((s) => `${s.reason} (${s.source})`))].join(", ")}` : "no throttling in this range";
  const overlay = lines === 0
    ? section("temp_latency", "Temperature vs inference latency", "empty", 0, html`<div class="msg" data-testid="thermal-missing">${r.missing.join("; ")}</div>`)
    : section("temp_latency", "Temperature (left, °C) vs inference P95 (right, dashed)", "ready", lines, html`<${DualChart} r=${r} />
      <div class="meta" data-testid="thermal-note">${r.thresholds.map((t) => t.text).join(" · ") || "no throttle threshold known for these sensors"} · ${throttled}${r.missing.length ? " · missing: " + r.missing.join("; ") : ""}</div>`,
      { "data-thresholds": r.thresholds.map((t) => t.value).join(","), "data-throttle-spans": String(r.throttle.length), "data-latency": r.latency ? r.latency.name : "" });
  if (!r.frames) return overlay;
  const f = r.frames;
  const rate = rows([f.rate]), jit = rows([f.jitter, f.p50, f.p99]);
  const chart = (id, title, d, unit, n) => (n === 0 ? section(id, title, "empty", 0, html`<div class="msg">no frames in this range</div>`)
    : section(id, title, "ready", n, html`<${TimeChart} xs=${d.xs} series=${d.series.filter((s) => s.ys.some((v) => v != null))} panel=${{ unit, title }} step=${r.step} />`));
  return html`${overlay}<div class="grid">
    ${chart("frame_rate", `Frame rate (${f.metric}, frames/s)`, rate, "short", [f.rate].filter(has).length)}
    ${chart("frame_jitter", "Frame-time jitter (P99 − P50), with P50 and P99", jit, "s", [f.jitter, f.p50, f.p99].filter(has).length)}
  </div>`;
}
