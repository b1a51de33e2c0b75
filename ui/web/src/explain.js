// "Why is it slow, and where?": the breakdown and explain panels of
// /model (and of an alert, through /model?...&at=), and the /compare page.
import { html } from "htm/preact";
import { useContext, useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import { PageCtx, TimeChart } from "./chart.js";
import { cdfChart, delta, histogramNames, stackable, versionLabels } from "./comparemath.js";
import { useAPI } from "./pages.js";
import { chooseStep, fmt, fmtTime, navigate, withParams } from "./util.js";

// useFetch is useAPI without deps or a 404 fallback.
const useFetch = (path, qs, enabled = true) => useAPI(path, qs, null, undefined, enabled);

const svcQuery = (svc, instance) => {
  const q = { job: svc.job, model: svc.model || "" };
  if (instance) q.instance = instance;
  return q;
};

// BreakdownPanel: where the time goes, as stacked means per phase (plus
// the part outside the server) and each phase's P95.
export function BreakdownPanel({ svc, instance }) {
  const ctx = useContext(PageCtx);
  const step = chooseStep(ctx.end - ctx.start, 900, ctx.scrape);
  const st = useFetch("/api/v1/appliance/breakdown", { ...svcQuery(svc, instance), from: Math.floor(ctx.start), to: Math.floor(ctx.end), step });
  let state = st.state, body = null, drawn = 0;
  if (st.state === "loading") body = html`<div class="msg">loading…</div>`;
  else if (st.state === "error") body = html`<div class="msg err">${st.error}</div>`;
  else {
    const d = st.data;
    const phases = [...d.phases, ...(d.outside ? [d.outside] : [])];
    const { xs, series } = stackable(phases);
    const any = series.some((s) => s.ys.some((v) => v != null));
    if (!d.phases.length || !any) {
      state = "empty";
      body = html`<div class="msg" data-testid="breakdown-missing">${d.phases.length ? "no requests in this range" : "No phase metrics for this service"}${d.missing && d.missing.length ? ": missing " + d.missing.join("; ") : ""}.</div>`;
    } else {
      drawn = series.length;
      body = html`<${TimeChart} xs=${xs} series=${series} panel=${{ unit: "s", stack: true, title: "breakdown" }} step=${d.step} />
        <table class="compact"><thead><tr><th>phase</th><th>mean</th><th>P95</th></tr></thead><tbody>
        ${phases.map((p) => html`<tr data-phase=${p.name}><td>${p.name}</td><td class="num">${fmt(p.range_mean, "s")}</td><td class="num">${fmt(p.range_p95, "s")}</td></tr>`)}
        ${d.total && html`<tr data-phase="server"><td><strong>server total</strong></td><td class="num">${fmt(d.total.range_mean, "s")}</td><td class="num">${fmt(d.total.range_p95, "s")}</td></tr>`}
        </tbody></table>
        <div class="meta" data-testid="breakdown-note">${d.note}${d.missing && d.missing.length ? " Missing: " + d.missing.join("; ") + "." : ""}</div>`;
    }
  }
  const attrs = state === "ready" ? { "data-series": String(drawn), "data-tiers": "" } : {};
  return html`<section class="panel wide" data-panel="breakdown" data-state=${state} ...${attrs}>
    <header><h3 title="mean time per request in each phase, stacked">Where the time goes (mean per request, stacked)</h3></header>
    ${body}
  </section>`;
}

// ExplainPanel: the window before a P95 rise (or an alert's start, at)
// against the window after: the phase that grew and the signals that
// moved with it, ranked.
export function ExplainPanel({ svc, instance, at }) {
  const qs = svcQuery(svc, instance);
  if (at) qs.at = at;
  const st = useFetch("/api/v1/appliance/explain", qs);
  let body = null, state = st.state;
  const r = st.data;
  if (st.state === "loading") body = html`<div class="msg">loading…</div>`;
  else if (st.state === "error") body = html`<div class="msg err">${st.error}</div>`;
  else if (r.status === "no_data") { state = "empty"; body = html`<div class="msg">${r.summary}</div>`; }
  else {
    body = html`<p class="summary" data-testid="explain-summary">${r.summary}</p>
      <div class="meta">before ${fmtTime(r.before.from)} – ${fmtTime(r.before.to)} · after ${fmtTime(r.after.from)} – ${fmtTime(r.after.to)}${r.detected ? " · change found in the P95 series" : at ? " · from the given time" : ""}</div>
      ${r.phases.length > 0 && html`<table class="compact"><thead><tr><th>phase (mean)</th><th>before</th><th>after</th><th>change</th><th>share of the change</th></tr></thead><tbody>
        ${r.phases.map((p) => html`<tr data-phase=${p.name} class=${p.name === r.grew ? "hot" : ""}><td>${p.name}</td><td class="num">${fmt(p.before, "s")}</td><td class="num">${fmt(p.after, "s")}</td>
          <td class="num">${delta(p.before, p.after, (v) => fmt(v, "s"))}</td><td class="num">${p.share == null ? "–" : Math.round(100 * p.share) + "%"}</td></tr>`)}
        </tbody></table>`}
      ${r.missing.length > 0 && html`<div class="msg" data-testid="explain-missing">Missing: ${r.missing.join("; ")}</div>`}
      <ol class="signals">${r.signals.map((s) => html`<li data-signal=${s.id} data-moved=${String(s.moved)} class=${s.moved ? "moved" : ""}>
        ${s.text} ${s.link && html`<a href=${s.link}>chart</a>`}${s.panel && !s.panel.includes("#") ? html` · <a href=${withParams({}, "/model") + "#" + s.panel}>panel</a>` : ""}</li>`)}</ol>`;
  }
  const attrs = state === "ready" ? { "data-series": String(r.signals.length + r.phases.length), "data-tiers": "", "data-status": r.status, "data-grew": r.grew } : {};
  return html`<section class="panel wide" data-panel="explain" data-state=${state} ...${attrs}>
    <header><h3>Explain the change${at ? " since " + fmtTime(Number(at)) : ""}</h3></header>
    ${body}
  </section>`;
}

// ---- /compare ----

// CDFChart overlays two CDFs on a log x axis.
function CDFChart({ a, b }) {
  const ctx = useContext(PageCtx);
  const el = useRef(null);
  useEffect(() => {
    const node = el.current;
    const { xs, ya, yb } = cdfChart(a.cdf, b.cdf);
    if (!xs.length) return;
    const fg = getComputedStyle(document.documentElement).getPropertyValue("--fg").trim();
    const axis = { stroke: fg };
    const u = new uPlot({
      width: node.clientWidth || 700, height: 260,
      scales: { x: { time: false, distr: 3 }, y: { range: [0, 1] } },
      axes: [{ ...axis, values: (u, sp) => sp.map((v) => (v == null ? "" : fmt(v, "s"))) }, { ...axis, values: (u, sp) => sp.map((v) => Math.round(v * 100) + "%") }],
      series: [{ value: (u, v) => (v == null ? "" : "≤ " + fmt(v, "s")) },
        { label: a.name, stroke: "#3b82f6", width: 2, value: (u, v) => (v == null ? "" : (100 * v).toFixed(1) + "%") },
        { label: b.name, stroke: "#f59e0b", width: 2, value: (u, v) => (v == null ? "" : (100 * v).toFixed(1) + "%") }],
    }, [xs, ya, yb], node);
    const ro = new ResizeObserver(() => u.setSize({ width: node.clientWidth || 700, height: 260 }));
    ro.observe(node);
    return () => { ro.disconnect(); u.destroy(); };
  }, [a, b, ctx.theme]);
  return html`<div class="chart" ref=${el}></div>`;
}

function usePromList(path, qs) {
  const st = useFetch(path, qs);
  return st.state === "ready" ? st.data || [] : null;
}

// Compare is /compare: a histogram, then two values of a version label
// (or two time windows around a release), overlaid.
function Compare({ p }) {
  const ctx = useContext(PageCtx);
  const names = usePromList("/api/v1/label/__name__/values", { start: Math.floor(ctx.start), end: Math.floor(ctx.end) });
  const hists = names ? histogramNames(names) : [];
  const metric = p.get("metric") || hists.find((n) => /e2e|latency|duration/.test(n)) || hists[0] || "";
  const mode = p.get("mode") || (p.get("a_from") ? "windows" : "versions");
  const series = useFetch("/api/v1/series", { "match[]": metric + "_bucket", start: Math.floor(ctx.start), end: Math.floor(ctx.end) }, !!metric);
  const labels = series.state === "ready" ? versionLabels(series.data || []) : [];
  const label = p.get("label") || (labels[0] && labels[0].label) || "";
  const values = (labels.find((l) => l.label === label) || { values: [] }).values;
  const va = p.get("a") || values[0] || "", vb = p.get("b") || values[values.length - 1] || "";
  const mid = (ctx.start + ctx.end) / 2;
  const win = {
    a_from: p.get("a_from") || String(Math.floor(ctx.start)), a_to: p.get("a_to") || String(Math.floor(mid)),
    b_from: p.get("b_from") || String(Math.floor(mid)), b_to: p.get("b_to") || String(Math.floor(ctx.end)),
  };
  const releases = useFetch("/api/v1/appliance/annotations", { from: Math.floor(ctx.start), to: Math.ceil(ctx.end) });
  const marks = releases.state === "ready" && Array.isArray(releases.data)
    ? releases.data.filter((x) => x.kind === "release" || (x.tags || []).includes("release") || x.kind === "restart") : [];
  const qs = { metric };
  if (p.get("match")) qs.match = p.get("match");
  if (mode === "versions") Object.assign(qs, { label, a: va, b: vb, from: Math.floor(ctx.start), to: Math.floor(ctx.end) });
  else Object.assign(qs, win);
  const ready = !!metric && (mode === "windows" || (label && va && vb));
  const cmp = useFetch("/api/v1/appliance/compare", qs, ready);
  const set = (o) => navigate(withParams(o));
  const sel = (name, value, opts, on) => html`<select name=${name} data-testid=${"compare-" + name} value=${value} onChange=${(e) => on(e.target.value)}>
    ${opts.map((o) => html`<option value=${o}>${o}</option>`)}</select>`;
  const toLocal = (sec) => { const d = new Date(Number(sec) * 1000 - new Date().getTimezoneOffset() * 60000); return isNaN(d) ? "" : d.toISOString().slice(0, 16); };
  const fromLocal = (v) => String(Math.floor(Date.parse(v) / 1000));
  const around = (t) => { const h = 1800; set({ mode: "windows", a_from: String(Math.floor(t - h)), a_to: String(Math.floor(t)), b_from: String(Math.floor(t)), b_to: String(Math.floor(Math.min(t + h, Date.now() / 1000))) }); };

  let state = cmp.state === "idle" ? "empty" : cmp.state, body;
  const r = cmp.data;
  if (names == null || (metric && series.state === "loading")) { state = "loading"; body = html`<div class="msg">loading…</div>`; }
  else if (!metric) { state = "empty"; body = html`<div class="msg">No histogram in storage.</div>`; }
  else if (cmp.state === "idle") body = html`<div class="msg">${mode === "versions" ? `Pick a label with two values or more (${metric} has ${labels.length ? labels.map((l) => l.label).join(", ") : "none"}), or compare two time windows.` : ""}</div>`;
  else if (cmp.state === "loading") body = html`<div class="msg">loading…</div>`;
  else if (cmp.state === "error") body = html`<div class="msg err">${cmp.error}</div>`;
  else if (!r.a.cdf.length && !r.b.cdf.length) { state = "empty"; body = html`<div class="msg">No requests on either side in this range.</div>`; }
  else body = html`<${CDFChart} a=${r.a} b=${r.b} />`;
  const cdfAttrs = state === "ready" ? { "data-series": String([r.a, r.b].filter((d) => d.cdf.length).length), "data-tiers": "" } : {};
  const qState = state === "ready" ? "ready" : state;
  return html`<h1>Release compare</h1>
    <div class="bar compare">
      <label>histogram ${sel("metric", metric, hists.length ? hists : [metric], (v) => set({ metric: v, label: "", a: "", b: "" }))}</label>
      <label>compare ${sel("mode", mode, ["versions", "windows"], (v) => set({ mode: v === "versions" ? "" : v }))}</label>
      ${mode === "versions" ? html`<label>label ${sel("label", label, labels.length ? labels.map((l) => l.label) : [label], (v) => set({ label: v, a: "", b: "" }))}</label>
        <label>A ${sel("a", va, values, (v) => set({ a: v }))}</label><label>B ${sel("b", vb, values, (v) => set({ b: v }))}</label>`
      : html`<label>A <input type="datetime-local" name="a_from" value=${toLocal(win.a_from)} onChange=${(e) => set({ a_from: fromLocal(e.target.value) })} />–<input type="datetime-local" name="a_to" value=${toLocal(win.a_to)} onChange=${(e) => set({ a_to: fromLocal(e.target.value) })} /></label>
        <label>B <input type="datetime-local" name="b_from" value=${toLocal(win.b_from)} onChange=${(e) => set({ b_from: fromLocal(e.target.value) })} />–<input type="datetime-local" name="b_to" value=${toLocal(win.b_to)} onChange=${(e) => set({ b_to: fromLocal(e.target.value) })} /></label>`}
    </div>
    ${marks.length > 0 && html`<div class="bar releases" data-testid="release-markers">releases and restarts: ${marks.slice(-8).map((m) => html`<button class="link" title=${m.text} onClick=${() => around(m.time)}>${fmtTime(m.time)} ${m.text}</button>`)}</div>`}
    <section class="panel wide" data-panel="compare-cdf" data-state=${state} ...${cdfAttrs}>
      <header><h3>CDF of ${metric || "–"} (from the buckets, log x)</h3></header>
      ${body}
    </section>
    <section class="panel wide" data-panel="compare-quantiles" data-state=${qState} ...${qState === "ready" ? { "data-series": "3", "data-tiers": "" } : {}}>
      <header><h3>Quantiles (histogram_quantile over each side's buckets)</h3></header>
      ${qState === "ready" ? html`<table class="compact"><thead><tr><th></th><th>${r.a.name}</th><th>${r.b.name}</th><th>B − A</th></tr></thead><tbody>
        ${["p50", "p95", "p99"].map((q) => html`<tr data-q=${q} data-a=${String(r.a.quantiles[q])} data-b=${String(r.b.quantiles[q])}><td>${q.toUpperCase()}</td>
          <td class="num">${fmt(r.a.quantiles[q], "s")}</td><td class="num">${fmt(r.b.quantiles[q], "s")}</td><td class="num">${delta(r.a.quantiles[q], r.b.quantiles[q], (v) => fmt(v, "s"))}</td></tr>`)}
        <tr data-q="count"><td>requests</td><td class="num">${fmt(r.a.count, "short")}</td><td class="num">${fmt(r.b.count, "short")}</td><td></td></tr>
        </tbody></table>` : html`<div class="msg">${state === "loading" ? "loading…" : "–"}</div>`}
    </section>`;
}

export const EXPLAIN_PAGES = { "/compare": Compare };
