// Pipelines (/pipeline and /pipeline/<name>): edge–cloud chains whose
// segments run on their own devices. One answer of
// /api/v1/appliance/pipelines/<name> feeds every panel: the segments'
// table (mean, P95, share, transfer figures, the slowest named), the
// stacked means, and each segment's P95 and mean over time.
import { html } from "htm/preact";
import { useContext } from "preact/hooks";
import { PageCtx, TimeChart } from "./chart.js";
import { stackable } from "./comparemath.js";
import { useAPI } from "./pages.js";
import { chooseStep, fmt, withParams } from "./util.js";

// PREFIX is the path of a pipeline's page, before its name.
const PREFIX = "/pipeline/";

// pipelineName reads <name> of /pipeline/<name>.
export const pipelineName = (path) => decodeURIComponent(path.slice(PREFIX.length).replace(/\/+$/, ""));

const source = (s) => `${s.metric}${s.matchers ? `{${s.matchers}}` : ""} (${s.kind === "histogram" ? "histogram" : "duration gauge"})`;

// SeriesPanel is one chart of the answer: data-panel=id, the testability
// contract's states; series are [{name, mean: [[t, v]]}].
function SeriesPanel({ id, title, st, rows, stack, note }) {
  let state = st.state, body, drawn = 0;
  if (st.state === "loading") body = html`<div class="msg">loading…</div>`;
  else if (st.state === "error") body = html`<div class="msg err">${st.error}</div>`;
  else {
    const { xs, series } = stackable(rows);
    const shown = series.filter((s) => s.ys.some((v) => v != null));
    if (!shown.length) { state = "empty"; body = html`<div class="msg">no samples of any segment in this range</div>`; }
    else {
      drawn = shown.length;
      body = html`<${TimeChart} xs=${xs} series=${shown} panel=${{ unit: "s", stack, title }} step=${st.data.step} />
        ${note && html`<div class="meta" data-testid="pipeline-note">${note}</div>`}`;
    }
  }
  const attrs = state === "ready" ? { "data-series": String(drawn), "data-tiers": "" } : {};
  return html`<section class="panel" data-panel=${id} data-state=${state} ...${attrs}>
    <header><h3>${title}</h3></header>${body}</section>`;
}

function Segments({ st }) {
  let state = st.state, body, n = 0;
  const r = st.data;
  if (st.state === "loading") body = html`<div class="msg">loading…</div>`;
  else if (st.state === "error") body = html`<div class="msg err">${st.error}</div>`;
  else if (!r.slowest) { state = "empty"; body = html`<div class="msg">${r.summary}</div>`; }
  else {
    n = r.segments.length;
    const tr = (s, k) => (s.transfer && s.transfer.configured.includes(k) ? fmt(s.transfer[k], k === "bytes" ? "bytes" : "short") : "–");
    body = html`<table class="compact"><thead><tr><th>segment</th><th>source</th><th>mean</th><th>P95</th><th>share of the mean</th><th>bytes</th><th>retries</th><th>failures</th></tr></thead><tbody>
      ${r.segments.map((s) => html`<tr data-segment=${s.name} data-share=${String(s.share)} data-mean=${String(s.range_mean)} data-p95=${String(s.range_p95)}
          data-bytes=${s.transfer ? String(s.transfer.bytes) : undefined} data-retries=${s.transfer ? String(s.transfer.retries) : undefined} data-failures=${s.transfer ? String(s.transfer.failures) : undefined}
          class=${s.name === r.slowest ? "hot" : ""}>
        <td>${s.name}${s.name === r.slowest ? " (slowest)" : ""}</td><td><code>${source(s)}</code></td>
        <td class="num">${fmt(s.range_mean, "s")}</td><td class="num">${fmt(s.range_p95, "s")}</td>
        <td class="num">${s.share == null ? "–" : html`<span class="budget"><span class="bar-fill" style=${{ width: Math.round(100 * s.share) + "%" }}></span></span> ${Math.round(100 * s.share)}%`}</td>
        <td class="num">${tr(s, "bytes")}</td><td class="num">${tr(s, "retries")}</td><td class="num">${tr(s, "failures")}</td></tr>`)}
      <tr data-segment="total"><td><strong>chain (sum of the means)</strong></td><td></td><td class="num">${fmt(r.total_mean, "s")}</td><td class="num">–</td><td class="num">100%</td><td></td><td></td><td></td></tr>
      </tbody></table>
      ${r.missing.length > 0 && html`<div class="msg" data-testid="pipeline-missing">No data: ${r.missing.join("; ")}</div>`}`;
  }
  const attrs = state === "ready" ? { "data-series": String(n), "data-tiers": "", "data-slowest": r.slowest, "data-share": String(r.slowest_share) } : {};
  return html`<section class="panel wide" data-panel="pipeline-segments" data-state=${state} ...${attrs}>
    <header><h3>Segments over the range (transfer figures: increase over the range)</h3></header>${body}</section>`;
}

// Pipeline is /pipeline/<name>.
function Pipeline() {
  const ctx = useContext(PageCtx);
  const name = pipelineName(location.pathname);
  const step = chooseStep(ctx.end - ctx.start, 900, ctx.scrape);
  const st = useAPI("/api/v1/appliance/pipelines/" + encodeURIComponent(name), { from: Math.floor(ctx.start), to: Math.floor(ctx.end), step }, [name]);
  const segs = st.state === "ready" ? st.data.segments : [];
  const r = st.data;
  return html`<h1>Pipeline ${name}</h1>
    <div class="bar"><a href=${withParams({}, "/pipeline")}>all pipelines</a>
      ${st.state === "ready" && html`<span class="summary" data-testid="pipeline-summary" data-slowest=${r.slowest} data-share=${String(r.slowest_share)}>${r.summary}</span>`}</div>
    <${Segments} st=${st} />
    <div class="grid">
      <${SeriesPanel} id="pipeline-stack" title="Where the time goes (mean per item, stacked)" st=${st} rows=${segs} stack=${true} note=${st.state === "ready" ? r.note : ""} />
      <${SeriesPanel} id="pipeline-p95" title="P95 per segment (not additive)" st=${st} rows=${segs.map((s) => ({ name: s.name, mean: s.p95 }))} stack=${false} />
      <${SeriesPanel} id="pipeline-mean" title="Mean per segment" st=${st} rows=${segs} stack=${false} />
    </div>`;
}

// Pipelines is /pipeline: the configured pipelines.
function Pipelines() {
  const st = useAPI("/api/v1/appliance/pipelines", null, []);
  const list = st.state === "ready" ? st.data || [] : [];
  const state = st.state === "ready" ? (list.length ? "ready" : "empty") : st.state;
  const attrs = state === "ready" ? { "data-series": String(list.length), "data-tiers": "" } : {};
  return html`<h1>Pipelines</h1>
    <section class="panel wide" data-panel="pipelines" data-state=${state} ...${attrs}>
      <header><h3>Configured pipelines (config key <code>pipelines</code>)</h3></header>
      ${st.state === "loading" ? html`<div class="msg">loading…</div>` : st.state === "error" ? html`<div class="msg err">${st.error}</div>`
        : !list.length ? html`<div class="msg">No pipeline in the config: add a <code>pipelines:</code> section (see the README).</div>`
        : html`<table class="compact"><thead><tr><th>pipeline</th><th>segments</th></tr></thead><tbody>
          ${list.map((p) => html`<tr data-pipeline=${p.name}><td><a href=${withParams({}, PREFIX + encodeURIComponent(p.name))}>${p.name}</a></td>
            <td>${p.segments.map((s) => s.name).join(" → ")}</td></tr>`)}</tbody></table>`}
    </section>`;
}

// PIPELINE_PAGES: a key ending in "/" is a prefix (see pageFor).
export const PIPELINE_PAGES = { "/pipeline": Pipelines, [PREFIX]: Pipeline };
