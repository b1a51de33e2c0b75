// The SLO pages: /slo (every SLO now, worst budget first, and its
// attainment over the page's range) and /reports (the weekly reports'
// archive, open, send now, preview of the next one).
import { html } from "htm/preact";
import { useContext, useState } from "preact/hooks";
import { PageCtx, Panel } from "./chart.js";
import { ListPanel, useAPI } from "./pages.js";
import { api, fmt, fmtTime } from "./util.js";
import { attainmentWindow, BURN_WINDOWS, byBudget, isoWeek } from "./slomath.js";

const labelText = (l) => Object.keys(l || {}).sort().map((k) => `${k}=${l[k]}`).join(" ");

// burnClass marks a burn rate at or above the factor of one of the SLO's
// alert conditions (its severity), so a page shows what would fire.
function burnClass(s, w, v) {
  const hit = (s.alerts || []).filter((a) => (a.long === w || a.short === w) && v >= a.factor);
  if (hit.some((a) => a.severity === "P0")) return "num burn P0";
  return hit.length ? "num burn P1" : "num";
}

function Budget({ v }) {
  if (v == null) return html`<span class="meta">no traffic</span>`;
  const pct = Math.max(0, Math.min(1, v));
  const cls = v <= 0 ? "red" : v < 0.25 ? "amber" : "green";
  return html`<span class=${"budget " + cls}><span class="bar-fill" style=${{ width: pct * 100 + "%" }}></span></span> <span class=${"val " + cls}>${fmt(v, "ratio")}</span>`;
}

function SLOPage() {
  const ctx = useContext(PageCtx);
  const st = useAPI("/api/v1/appliance/slos", null, []);
  const list = st.state === "ready" ? byBudget(st.data || []) : [];
  const names = [...new Set(list.map((s) => s.slo))];
  const w = attainmentWindow(ctx.end - ctx.start);
  return html`<h1>SLOs</h1>
    <${ListPanel} id="slo-status" title="Every SLO now, least budget left first" st=${st} rows=${list.length}
      extra=${html`<span class="meta">burn rate 1 spends the budget exactly over the window; marked: at or above an alert's factor</span>`}>
      <div class="scroll"><table><thead><tr><th>slo</th><th>service</th><th>labels</th><th>kind</th><th>objective</th><th>window</th><th>attainment</th><th>budget left</th>
        ${BURN_WINDOWS.map((b) => html`<th class="num">burn ${b}</th>`)}</tr></thead>
      <tbody>${list.map((s) => html`<tr data-slo=${s.slo} data-budget-left=${s.budget_left == null ? "" : String(s.budget_left)}>
        <td>${s.slo}</td><td>${s.service}</td><td>${labelText(s.labels)}</td><td>${s.kind}</td><td class="num">${fmt(s.objective, "ratio")}</td><td>${s.window}</td>
        <td class="num">${fmt(s.attainment, "ratio")}</td><td><${Budget} v=${s.budget_left} /></td>
        ${BURN_WINDOWS.map((b) => {
          const v = s.burn_rates ? s.burn_rates[b] : undefined;
          return html`<td class=${v == null ? "num" : burnClass(s, b, v)} data-burn=${b}>${v == null ? "–" : v.toFixed(2)}</td>`;
        })}</tr>`)}</tbody></table></div>
    </${ListPanel}>
    ${st.state === "ready" && names.length > 0 && html`<h2>Attainment <span class="meta">1 − slo:sli_error:ratio_rate${w}, against the objective</span></h2>
      <div class="grid">${names.map((n) => {
        const sel = `{slo=${JSON.stringify(n)}}`;
        const panel = {
          kind: "timeseries", unit: "ratio", title: n,
          description: `attainment over a rolling ${w} (recorded), and the objective`,
          queries: [{ expr: `1 - slo:sli_error:ratio_rate${w}${sel}`, legend: "" }, { expr: `slo:objective:ratio${sel}`, legend: "objective" }],
        };
        return html`<${Panel} key=${n + w} id=${"slo-attainment/" + n} panel=${panel} sel="" />`;
      })}</div>`}`;
}

const FORMATS = ["html", "md", "json"];

function Links({ week }) {
  return FORMATS.map((f) => html`<a class="fmt" href=${`/reports/${week}.${f}`} target="_blank" rel="noopener" data-format=${f}>${f}</a> `);
}

function SendButton({ week, onSent }) {
  const [st, setSt] = useState("");
  const send = async () => {
    setSt("sending…");
    try {
      await api(`/api/v1/appliance/reports/${encodeURIComponent(week)}/send`, null, { method: "POST" });
      setSt("sent");
      onSent && onSent();
    } catch (e) { setSt(e.message); }
  };
  return html`<button data-testid="report-send" data-week=${week} onClick=${send} disabled=${st === "sending…"}>send now</button>${st && html` <span class=${st === "sent" || st === "sending…" ? "meta" : "err"} data-testid="report-send-result" data-result=${st === "sent" ? "sent" : st === "sending…" ? "sending" : "error"}>${st}</span>`}`;
}

// Preview is the next report: the current week so far, computed on
// demand (the JSON for the summary, the HTML on request).
function Preview({ week }) {
  const st = useAPI(`/api/v1/appliance/reports/${week}.json`, null, [week]);
  const [show, setShow] = useState(false);
  const slos = st.state === "ready" && st.data && Array.isArray(st.data.slos) ? st.data.slos : [];
  return html`<${ListPanel} id="report-preview" title=${`Next report: ${week} (this week so far)`} st=${st} rows=${slos.length}
      extra=${html`<span><${Links} week=${week} /> <button data-testid="report-preview-html" onClick=${() => setShow(!show)}>${show ? "hide" : "show"} HTML</button></span>`}>
    <table><thead><tr><th>service</th><th>slo</th><th>labels</th><th>objective</th><th>attainment</th><th>last week</th><th>budget left</th><th>met</th></tr></thead>
    <tbody>${slos.map((s) => html`<tr><td>${s.service}</td><td>${s.slo}</td><td>${labelText(s.labels)}</td><td class="num">${fmt(s.objective, "ratio")}</td>
      <td class="num">${fmt(s.this_week && s.this_week.attainment, "ratio")}</td><td class="num">${fmt(s.last_week && s.last_week.attainment, "ratio")}</td>
      <td><${Budget} v=${s.budget_left} /></td><td>${s.met == null ? "–" : s.met ? "yes" : "no"}</td></tr>`)}</tbody></table>
    ${show && html`<iframe class="report" title=${"report " + week} src=${`/reports/${week}.html`}></iframe>`}
  </${ListPanel}>`;
}

function ReportsPage() {
  const [ver, setVer] = useState(0);
  const st = useAPI("/api/v1/appliance/reports", null, [ver]);
  const list = st.state === "ready" && Array.isArray(st.data) ? st.data : [];
  const week = isoWeek(new Date());
  const lastWeek = isoWeek(new Date(Date.now() - 7 * 86400000));
  return html`<h1>Weekly reports</h1>
    <div class="bar"><span>last week (${lastWeek}):</span><${Links} week=${lastWeek} /><${SendButton} week=${lastWeek} onSent=${() => setVer(ver + 1)} /></div>
    <${Preview} week=${week} />
    <${ListPanel} id="reports" title=${`Archive (${list.length})`} st=${st} rows=${list.length}>
      <div class="scroll"><table><thead><tr><th>week</th><th>open</th><th>size</th><th>sent</th><th></th></tr></thead>
      <tbody>${list.map((r) => html`<tr data-week=${r.week}><td>${r.week}</td><td>${(r.formats || []).map((f) => html`<a class="fmt" href=${`/reports/${r.week}.${f}`} target="_blank" rel="noopener" data-format=${f}>${f}</a> `)}</td>
        <td class="num">${fmt((r.sizes || {}).html, "bytes")}</td><td>${r.sent ? fmtTime(Date.parse(r.sent) / 1000) : "not sent"}</td>
        <td><${SendButton} week=${r.week} onSent=${() => setVer(ver + 1)} /></td></tr>`)}</tbody></table></div>
    </${ListPanel}>`;
}

export const SLO_PAGES = { "/slo": SLOPage, "/reports": ReportsPage };
