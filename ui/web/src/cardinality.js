// /cardinality: what fills the store and who sends it. The report comes
// from GET /api/v1/appliance/cardinality (package cardinality); the growth
// chart reads appliance_storage_active_series over the last day.
import { html } from "htm/preact";
import { useContext, useEffect, useState } from "preact/hooks";
import { PageCtx, rangeQuery, TimeChart } from "./chart.js";
import { ListPanel, useAPI } from "./pages.js";
import { fmt, fmtAgo, isAbort, withParams } from "./util.js";

const DAY = 86400;

// A table panel of the report; rows is the list drawn.
function Table({ id, title, st, rows, head, row, extra }) {
  const list = st.state === "ready" ? rows(st.data) || [] : [];
  return html`<${ListPanel} id=${id} title=${title} st=${st} rows=${list.length} extra=${extra}>
    <div class="scroll"><table><thead><tr>${head.map((h) => html`<th>${h}</th>`)}</tr></thead>
    <tbody>${list.map(row)}</tbody></table></div>
  </${ListPanel}>`;
}

const explore = (expr) => withParams({ expr }, "/explore");
// Counts: exact below 1000, then k, M, ...
const count = (n) => (n == null ? "–" : Math.abs(n) < 1000 ? String(n) : fmt(n));
const signed = (n) => (n > 0 ? "+" : "") + count(n);

function Summary({ st }) {
  const d = st.data || {};
  const state = st.state === "ready" ? "ready" : st.state;
  const attrs = state === "ready" ? { "data-series": "1", "data-tiers": "raw" } : {};
  const used = d.maxSeries ? d.activeSeries / d.maxSeries : 0;
  return html`<section class="panel wide" data-panel="summary" data-state=${state} ...${attrs}>
    <header><h3>Series</h3></header>
    ${st.state === "loading" ? html`<div class="msg">loading…</div>` : st.state === "error" ? html`<div class="msg err">${st.error}</div>` : html`<div class="stats">
      <div class="stat"><div class="val" data-testid="total-series">${count(d.totalSeries)}</div><div class="lbl">series today (UTC)</div></div>
      <div class="stat"><div class="val">${count(d.yesterdaySeries)}</div><div class="lbl">series yesterday</div></div>
      <div class="stat ${d.growth > 0 ? "amber" : ""}"><div class="val" data-testid="growth">${signed(d.growth)}</div><div class="lbl">growth since yesterday</div></div>
      <div class="stat ${used >= 1 ? "red" : used >= 0.8 ? "amber" : ""}"><div class="val" data-testid="max-series">${d.maxSeries ? `${count(d.activeSeries)} / ${count(d.maxSeries)}` : "off"}</div>
        <div class="lbl">active series / storage.max_series</div></div>
      <div class="stat ${(d.flagged || []).length ? "amber" : "green"}"><div class="val">${(d.flagged || []).length}</div><div class="lbl">labels flagged (N = ${d.maxLabelValues})</div></div>
    </div>`}
  </section>`;
}

// Growth: active series over the last day, whatever the page's range.
function Growth() {
  const ctx = useContext(PageCtx);
  const [st, setSt] = useState({ state: "loading" });
  useEffect(() => {
    const ac = new AbortController();
    const end = Date.now() / 1000, step = 60;
    rangeQuery("sum(appliance_storage_active_series)", end - DAY, end, step, ac.signal)
      .then((r) => setSt(r.series.length ? { state: "ready", r, step } : { state: "empty" }))
      .catch((e) => { if (!isAbort(e)) setSt({ state: "error", error: e.message }); });
    return () => ac.abort();
  }, [ctx.tick]);
  const attrs = st.state === "ready" ? { "data-series": String(st.r.series.length), "data-tiers": (st.r.tiers || []).join(",") } : {};
  return html`<section class="panel wide" data-panel="growth" data-state=${st.state} ...${attrs}>
    <header><h3>Active series, last 24 h</h3><a class="drill" href=${explore("appliance_storage_active_series")}>explore →</a></header>
    ${st.state === "loading" ? html`<div class="msg">loading…</div>` : st.state === "error" ? html`<div class="msg err">${st.error}</div>`
      : st.state === "empty" ? html`<div class="msg">no appliance_storage_active_series yet (the self-scrape writes it)</div>`
      : html`<${TimeChart} xs=${st.r.xs} series=${st.r.series.map((s) => ({ ...s, name: "active series" }))} panel=${{ unit: "short", title: "growth" }} step=${st.step} />`}
  </section>`;
}

function Cardinality() {
  const st = useAPI("/api/v1/appliance/cardinality", null, []);
  const d = st.data || {};
  return html`<h1>Cardinality</h1>
    <p class="meta">Series of today's index (raw tier). A label is flagged when its values look like ids (UUIDs, long hex or digit strings) or it has more than ${d.maxLabelValues || "N"} values for one metric (storage.cardinality.max_label_values); each flag is also the series <code>appliance_cardinality_warning</code>, which the targets pack alerts on (P2).</p>
    <${Summary} st=${st} />
    <${Table} id="flagged" title="Flagged labels" st=${st} rows=${(x) => x.flagged}
      head=${["metric", "label", "job", "instance", "values", "reason", "examples"]}
      row=${(f) => html`<tr data-flag=${f.metric + "/" + f.label}><td><a href=${explore(`count by (${f.label}) (${f.metric})`)}>${f.metric}</a></td>
        <td><strong>${f.label}</strong></td><td>${f.job}</td><td>${f.instance}</td><td class="num">${count(f.values)}</td>
        <td><span class="badge">${f.reason === "id_like" ? "looks like ids" : "too many values"}</span></td><td class="lbls">${(f.examples || []).join(", ")}</td></tr>`} />
    <div class="grid card">
      <${Table} id="top-metrics" title="Top metrics by series" st=${st} rows=${(x) => x.topMetrics}
        head=${["metric", "series", "yesterday", "growth"]}
        row=${(m) => html`<tr><td class="name"><a href=${explore(m.name)}>${m.name}</a></td><td class="num">${count(m.series)}</td><td class="num">${count(m.yesterday)}</td><td class="num">${signed(m.growth)}</td></tr>`} />
      <${Table} id="top-labels" title="Top labels by values" st=${st} rows=${(x) => x.topLabels}
        head=${["label", "values"]} row=${(l) => html`<tr><td class="name">${l.name}</td><td class="num">${count(l.count)}</td></tr>`} />
      <${Table} id="top-pairs" title="Top label pairs by series" st=${st} rows=${(x) => x.topPairs}
        head=${["label=value", "series"]} row=${(l) => html`<tr><td class="lbls name">${l.name}</td><td class="num">${count(l.count)}</td></tr>`} />
    </div>
    <${Table} id="targets" title="Series per target" st=${st} rows=${(x) => x.targets}
      head=${["job", "instance", "series (last scrape)", "sample_limit", "of limit", "refused (storage.max_series)", "last refused"]}
      row=${(t) => html`<tr><td>${t.job}</td><td>${t.instance}</td><td class="num">${t.series < 0 ? "push" : count(t.series)}</td>
        <td class="num">${t.sampleLimit || "–"}</td>
        <td>${t.sampleLimit ? html`<span class=${"budget " + (t.ratio >= 1 ? "red" : t.ratio >= 0.8 ? "amber" : "")}><span class="bar-fill" style=${`width:${Math.min(100, t.ratio * 100)}%`}></span></span> ${fmt(t.ratio, "ratio")}` : ""}</td>
        <td class=${"num" + (t.refused ? " err" : "")}>${t.refused ? count(t.refused) : ""}</td>
        <td class="lbls">${t.lastRefused ? `${fmtAgo(t.lastRefused)}: ${t.refusedExample}` : ""}</td></tr>`} />
    <${Growth} />`;
}

export const CARDINALITY_PAGES = { "/cardinality": Cardinality };
