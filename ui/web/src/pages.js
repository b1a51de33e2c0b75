// The pages. Each path is a contract (see the README); every page keeps
// its state in the URL.
import { html } from "htm/preact";
import { useContext, useEffect, useRef, useState } from "preact/hooks";
import { instantQuery, PageCtx, Panel, rangeQuery, ResultChart, isHeatmap, MAX_SERIES } from "./chart.js";
import { api, takeBoot, fmt, fmtAgo, fmtTime, isAbort, legendFor, navigate, num, withParams } from "./util.js";
import { Completer } from "./complete.js";
import { SLO_PAGES } from "./slo.js";
import { BreakdownPanel, EXPLAIN_PAGES, ExplainPanel } from "./explain.js";
import { CARDINALITY_PAGES } from "./cardinality.js";
import { PIPELINE_PAGES } from "./pipeline.js";
import { ThermalPanels } from "./hardware.js";

// useAPI fetches one endpoint; reloads on deps and the refresh tick.
// Disabled (enabled false), it fetches nothing and is idle.
export function useAPI(path, qs, deps, fallback, enabled = true) {
  const ctx = useContext(PageCtx);
  // The first answer may already be in the page (ui/boot.go): then the
  // first render has it and the first effect fetches nothing.
  const [boot] = useState(() => (enabled ? takeBoot(path, qs || undefined) : null));
  const [st, setSt] = useState(boot ? { state: "ready", ...boot } : { state: "loading" });
  const key = JSON.stringify([path, qs, deps, enabled]);
  const last = useRef(boot ? key : "");
  const skip = useRef(!!boot);
  useEffect(() => {
    last.current = key;
    if (skip.current) { skip.current = false; return; }
    if (!enabled) { setSt({ state: "idle" }); return; }
    const ac = new AbortController();
    api(path, qs, { signal: ac.signal }).then(({ data, tiers }) => setSt({ state: "ready", data, tiers }))
      .catch((e) => {
        if (isAbort(e)) return;
        if (fallback !== undefined && e.status === 404) setSt({ state: "ready", data: fallback, missing: true });
        else setSt({ state: "error", error: e.message });
      });
    return () => ac.abort();
  }, [key, ctx.tick]);
  // New parameters are loading from the render that asks for them.
  return last.current === key ? st : { state: "loading" };
}

// ListPanel is a panel fed by a non-PromQL endpoint (targets, alerts,
// silences): the same data-panel/data-state contract, data-series = rows.
export function ListPanel({ id, title, st, rows, children, extra }) {
  const state = st.state === "ready" ? (rows > 0 ? "ready" : "empty") : st.state;
  const attrs = state === "ready" ? { "data-series": String(rows), "data-tiers": st.tiers ? st.tiers.join(",") : "" } : {};
  return html`<section class="panel wide" data-panel=${id} data-state=${state} ...${attrs}>
    <header><h3>${title}</h3>${extra}</header>
    ${st.state === "loading" ? html`<div class="msg">loading…</div>` : st.state === "error" ? html`<div class="msg err">${st.error}</div>` : rows === 0 ? html`<div class="msg">none</div>` : children}
  </section>`;
}

// ---- dashboards: overview, model, probes, hardware ----

function Rows({ rows, sel, prefix }) {
  return rows.map((row) => {
    const svc = row.service;
    const rsel = svc ? svc.selector : sel;
    const pid = (p) => (prefix || svc ? `${row.id}/${p.id}` : p.id);
    return html`<div class="row" data-row=${row.id}>
      <h2>${row.title}${svc && html` <a class="drill" href=${withParams({ job: svc.job, model: svc.model }, "/model")}>model page →</a>
        <span class="meta">${svc.engine} · ${(svc.instances || []).length} instance(s)${svc.probes && svc.probes.length ? " · probes: " + svc.probes.join(", ") : ""}</span>`}</h2>
      <div class="grid">${(row.panels || []).map((p) => html`<${Panel} key=${pid(p)} id=${pid(p)} panel=${p} sel=${rsel} />`)}</div>
    </div>`;
  });
}

function Dashboard({ id, p, sel, head }) {
  const qs = {};
  for (const k of ["job", "model", "instance"]) if (p.get(k)) qs[k] = p.get(k);
  const st = useAPI("/api/v1/appliance/dashboards/" + id, qs, [id, JSON.stringify(qs)]);
  if (st.state === "loading") return html`<div data-loading="1" class="msg">loading dashboard…</div>`;
  if (st.state === "error") return html`<div class="msg err" data-panel="dashboard" data-state="error">dashboard ${id}: ${st.error}</div>`;
  const rows = st.data.rows || [];
  return html`<h1>${st.data.title}</h1>${head}${rows.length ? html`<${Rows} rows=${rows} sel=${sel} />`
    : html`<div class="msg" data-testid="no-panels">Nothing to show yet: none of this dashboard's metrics exist in storage (panels without a metric are hidden).</div>`}`;
}

// StatusStrip answers "usable right now?": red on P0/P1 firing or a probe
// failing most checks, amber on any firing alert, probe failures, a probe
// above its threshold or a target down, green otherwise.
function StatusStrip() {
  const ctx = useContext(PageCtx);
  const [st, setSt] = useState({ state: "loading" });
  useEffect(() => {
    const ac = new AbortController();
    const now = Date.now() / 1000;
    const q = (e) => instantQuery(e, now, ac.signal).then((r) => r.result).catch((e) => (isAbort(e) ? Promise.reject(e) : []));
    Promise.all([
      api("/api/v2/alerts", { active: "true", silenced: "false", inhibited: "false" }, { signal: ac.signal }).then((r) => r.data || []).catch((e) => (isAbort(e) ? Promise.reject(e) : [])),
      q("sum by (probe) (sum_over_time(probe_success[5m])) / sum by (probe) (count_over_time(probe_success[5m]))"),
      q("max by (probe) (quantile_over_time(0.95, probe_ttft_seconds[15m])) > max by (probe) (probe_ttft_threshold_seconds)"),
      q("max by (probe) (quantile_over_time(0.95, probe_duration_seconds[15m])) > max by (probe) (probe_duration_threshold_seconds)"),
      q("up == 0"),
    ]).then(([alerts, avail, ttft, dur, down]) => {
      const sev = { P0: 0, P1: 0, P2: 0, other: 0 };
      for (const a of alerts) sev[a.labels.severity in sev ? a.labels.severity : "other"]++;
      const reasons = [];
      let level = 0;
      if (sev.P0 + sev.P1 > 0) { level = 2; reasons.push(`${sev.P0} P0 / ${sev.P1} P1 alert(s) firing`); }
      if (sev.P2 + sev.other > 0) { level = Math.max(level, 1); reasons.push(`${sev.P2 + sev.other} other alert(s) firing`); }
      for (const r of avail) {
        const v = num(r.value[1]);
        if (v < 0.5) { level = 2; reasons.push(`probe ${r.metric.probe} failing (${fmt(v, "ratio")} ok)`); } else if (v < 1) { level = Math.max(level, 1); reasons.push(`probe ${r.metric.probe} ${fmt(v, "ratio")} ok`); }
      }
      for (const r of ttft) { level = Math.max(level, 1); reasons.push(`probe ${r.metric.probe}: TTFT P95 above threshold`); }
      for (const r of dur) { level = Math.max(level, 1); reasons.push(`probe ${r.metric.probe}: e2e P95 above threshold`); }
      if (down.length) { level = Math.max(level, 1); reasons.push(`${down.length} target(s) down`); }
      setSt({ state: "ready", level: ["green", "amber", "red"][level], reasons, sev, probes: avail.length });
    }).catch((e) => { if (!isAbort(e)) setSt({ state: "error", error: e.message }); });
    return () => ac.abort();
  }, [ctx.tick]);
  if (st.state !== "ready") return html`<div class="strip" data-panel="status" data-state=${st.state}>${st.error || "checking…"}</div>`;
  const words = { green: "Usable right now", amber: "Degraded", red: "Not usable" };
  return html`<div class=${"strip " + st.level} data-panel="status" data-state="ready" data-series="1" data-tiers="" data-status=${st.level}>
    <strong>${words[st.level]}</strong>
    <span>${st.reasons.length ? st.reasons.join(" · ") : `all probes passing (${st.probes}), no alert firing`}</span>
    <a href="/alerts">alerts: P0 ${st.sev.P0} · P1 ${st.sev.P1} · P2 ${st.sev.P2}</a>
  </div>`;
}

function Overview({ p }) {
  return html`<${StatusStrip} /><${Dashboard} id="overview" p=${p} />`;
}

// useServices lists the recognised services (job x model).
function useServices() {
  return useAPI("/api/v1/appliance/services", null, []);
}

function ServicePicker({ list, job, model }) {
  return html`<label class="pick">service <select data-testid="service" value=${job + "\u0000" + model} onChange=${(e) => {
    const [j, m] = e.target.value.split("\u0000");
    navigate(withParams({ job: j, model: m }));
  }}>${list.map((s) => html`<option value=${s.job + "\u0000" + (s.model || "")}>${s.job}${s.model ? " / " + s.model : ""}</option>`)}</select></label>`;
}

function Model({ p }) {
  const svcs = useServices();
  if (svcs.state === "loading") return html`<div data-loading="1" class="msg">loading services…</div>`;
  if (svcs.state === "error") return html`<div class="msg err">${svcs.error}</div>`;
  const list = svcs.data || [];
  let job = p.get("job") || "", model = p.get("model") || "";
  let svc = list.find((s) => s.job === job && (s.model || "") === model);
  if (!svc && !job && list.length) {
    svc = list.find((s) => s.engine !== "generic") || list[0];
    job = svc.job; model = svc.model || "";
  }
  if (!svc) return html`<div class="msg">No recognised service ${job}${model ? " / " + model : ""}.</div>`;
  const inst = p.get("instance");
  const sel = svc.selector + (inst ? (svc.selector ? "," : "") + `instance=${JSON.stringify(inst)}` : "");
  const qp = new URLSearchParams(p);
  qp.set("job", job); qp.set("model", model);
  return html`<${Dashboard} id="model" p=${qp} sel=${sel} head=${html`<div class="bar"><${ServicePicker} list=${list} job=${job} model=${model} />
    <span class="meta">${svc.engine} · selector <code>${sel || "(none)"}</code></span></div>
    <div class="grid why"><${ExplainPanel} svc=${svc} instance=${inst} at=${p.get("at")} /><${BreakdownPanel} svc=${svc} instance=${inst} /></div>`} />`;
}

function Probes({ p }) { return html`<${Dashboard} id="probes" p=${p} sel=${p.get("instance") ? `instance=${JSON.stringify(p.get("instance"))}` : ""} />`; }
function Hardware({ p }) { return html`<${Dashboard} id="hardware" p=${p} sel=${p.get("instance") ? `instance=${JSON.stringify(p.get("instance"))}` : ""} head=${html`<${ThermalPanels} p=${p} />`} />`; }

// ---- targets ----

function Targets() {
  const ctx = useContext(PageCtx);
  const targets = useAPI("/api/v1/targets", { state: "active" }, []);
  const tiers = useAPI("/api/v1/status/tiers", null, []);
  const [series, setSeries] = useState({});
  const probes = useQueryTable('max by (probe, instance, reason) (last_over_time(probe_success[5m]))');
  useEffect(() => {
    const ac = new AbortController();
    Promise.all(["scrape_series_added", "scrape_samples_scraped"].map((m) => instantQuery(m, Date.now() / 1000, ac.signal)))
      .then(([added, scraped]) => {
        const m = {};
        for (const r of scraped.result) (m[r.metric.job + "|" + r.metric.instance] ||= {}).scraped = r.value[1];
        for (const r of added.result) (m[r.metric.job + "|" + r.metric.instance] ||= {}).added = r.value[1];
        setSeries(m);
      }).catch(() => {});
    return () => ac.abort();
  }, [ctx.tick]);
  const active = (targets.data && targets.data.activeTargets) || [];
  const tierRows = Array.isArray(tiers.data) ? tiers.data : (tiers.data && tiers.data.tiers) || [];
  return html`<h1>Targets</h1>
    <${ListPanel} id="targets" title=${`Scrape targets (${active.length})`} st=${targets} rows=${active.length}>
      <div class="scroll"><table><thead><tr><th>job</th><th>instance</th><th>health</th><th>last scrape</th><th>duration</th><th>samples</th><th>series added</th><th>last error</th></tr></thead>
      <tbody>${active.map((t) => {
        const s = series[t.labels.job + "|" + t.labels.instance] || {};
        const auto = t.discoveredLabels && t.discoveredLabels.__meta_autodetect_detected;
        return html`<tr><td>${t.labels.job}${auto && html` <span class="badge" title="auto-detected">auto: ${auto}</span>`}</td><td>${t.scrapeUrl || t.labels.instance}</td>
          <td><span class=${"health " + t.health}>${t.health}</span></td><td>${fmtAgo(t.lastScrape)}</td><td class="num">${fmt(t.lastScrapeDuration, "s")}</td>
          <td class="num">${s.scraped ?? ""}</td><td class="num">${s.added ?? ""}</td><td class="err">${t.lastError}</td></tr>`;
      })}</tbody></table></div>
    </${ListPanel}>
    <${ListPanel} id="probes" title="Probes (last result)" st=${probes} rows=${(probes.data || []).length}>
      <div class="scroll"><table><thead><tr><th>probe</th><th>instance</th><th>result</th><th>reason</th></tr></thead>
      <tbody>${(probes.data || []).map((r) => html`<tr><td>${r.metric.probe}</td><td>${r.metric.instance}</td><td><span class=${"health " + (num(r.value[1]) ? "up" : "down")}>${num(r.value[1]) ? "ok" : "failed"}</span></td><td>${r.metric.reason || ""}</td></tr>`)}</tbody></table></div>
    </${ListPanel}>
    <${ListPanel} id="tiers" title="Storage tiers" st=${tiers} rows=${tierRows.length}>
      <div class="scroll"><table><thead><tr><th>tier</th><th>resolution</th><th>retention</th><th>covered from</th><th>covered to</th><th>lag</th><th>series</th><th>samples</th><th>disk</th></tr></thead>
      <tbody>${tierRows.map((t) => html`<tr><td>${t.tier}</td><td>${t.resolution}</td><td>${t.retention}</td><td>${t.coveredFrom ? fmtTime(Date.parse(t.coveredFrom) / 1000) : "–"}</td>
        <td>${t.coveredTo ? fmtTime(Date.parse(t.coveredTo) / 1000) : "–"}</td><td class="num">${t.lagSeconds != null ? fmt(t.lagSeconds, "s") : "–"}</td>
        <td class="num">${t.series}</td><td class="num">${t.samples}</td><td class="num">${fmt(t.diskBytes, "bytes")}</td></tr>`)}</tbody></table></div>
    </${ListPanel}>`;
}

function useQueryTable(expr) {
  const ctx = useContext(PageCtx);
  const [st, setSt] = useState({ state: "loading" });
  useEffect(() => {
    const ac = new AbortController();
    instantQuery(expr, Date.now() / 1000, ac.signal).then((r) => setSt({ state: "ready", data: r.result, tiers: r.tiers }))
      .catch((e) => { if (!isAbort(e)) setSt({ state: "error", error: e.message }); });
    return () => ac.abort();
  }, [expr, ctx.tick]);
  return st;
}

// ---- alerts ----

const HIDE = new Set(["__name__", "alertstate"]);
const matcherText = (m) => `${m.name}${m.isEqual === false ? (m.isRegex ? "!~" : "!=") : m.isRegex ? "=~" : "="}${JSON.stringify(m.value)}`;

function SilenceForm({ init, onDone }) {
  const [ms, setMs] = useState(init.length ? init : [{ name: "alertname", value: "", isRegex: false, isEqual: true }]);
  const [hours, setHours] = useState("2");
  const [by, setBy] = useState("dashboard");
  const [comment, setComment] = useState("");
  const [preview, setPreview] = useState(null);
  const [err, setErr] = useState("");
  const valid = ms.filter((m) => m.name && m.value !== "");
  const key = JSON.stringify(valid);
  useEffect(() => {
    if (!valid.length) { setPreview(null); return; }
    const ac = new AbortController();
    const qs = new URLSearchParams();
    valid.forEach((m) => qs.append("filter", matcherText(m)));
    fetch("/api/v2/alerts?" + qs, { signal: ac.signal }).then((r) => r.json()).then((d) => setPreview(Array.isArray(d) ? d : [])).catch(() => {});
    return () => ac.abort();
  }, [key]);
  const set = (i, k, v) => setMs(ms.map((m, j) => (j === i ? { ...m, [k]: v } : m)));
  const submit = async (e) => {
    e.preventDefault();
    const now = new Date();
    try {
      await api("/api/v2/silences", null, { method: "POST", body: { matchers: valid, startsAt: now.toISOString(), endsAt: new Date(now.getTime() + parseFloat(hours) * 3600e3).toISOString(), createdBy: by, comment: comment || "silenced from the dashboard" } });
      onDone(true);
    } catch (e2) { setErr(e2.message); }
  };
  return html`<form class="silence" data-testid="silence-form" onSubmit=${submit}>
    <h3>New silence</h3>
    ${ms.map((m, i) => html`<div class="matcher">
      <input name="matcher-name" placeholder="label" value=${m.name} onInput=${(e) => set(i, "name", e.target.value)} />
      <select name="matcher-op" value=${(m.isEqual === false ? "!" : "") + (m.isRegex ? "~" : "=")} onChange=${(e) => setMs(ms.map((x, j) => (j === i ? { ...x, isEqual: !e.target.value.startsWith("!"), isRegex: e.target.value.endsWith("~") } : x)))}>
        <option value="=">=</option><option value="!=">!=</option><option value="~">=~</option><option value="!~">!~</option></select>
      <input name="matcher-value" placeholder="value" value=${m.value} onInput=${(e) => set(i, "value", e.target.value)} />
      <button type="button" class="link" onClick=${() => setMs(ms.filter((_, j) => j !== i))}>remove</button></div>`)}
    <button type="button" class="link" onClick=${() => setMs([...ms, { name: "", value: "", isRegex: false, isEqual: true }])}>+ matcher</button>
    <div class="matcher"><label>hours <input name="hours" size="4" value=${hours} onInput=${(e) => setHours(e.target.value)} /></label>
      <label>by <input name="createdBy" value=${by} onInput=${(e) => setBy(e.target.value)} /></label>
      <label>comment <input name="comment" value=${comment} onInput=${(e) => setComment(e.target.value)} /></label></div>
    <div class="preview" data-testid="silence-preview">${preview == null ? "matches: –" : `matches ${preview.length} active alert(s)`}
      ${preview && preview.slice(0, 10).map((a) => html`<div class="lbls">${labelsText(a.labels)}</div>`)}</div>
    ${err && html`<div class="msg err">${err}</div>`}
    <button type="submit" data-testid="silence-create" disabled=${!valid.length}>create silence</button>
    <button type="button" onClick=${() => onDone(false)}>cancel</button>
  </form>`;
}

const labelsText = (l) => Object.keys(l).filter((k) => !HIDE.has(k)).sort().map((k) => `${k}=${l[k]}`).join(" ");

function Alerts() {
  const [ver, setVer] = useState(0);
  const [form, setForm] = useState(null);
  const groups = useAPI("/api/v2/alerts/groups", null, [ver]);
  const pending = useAPI("/api/v1/alerts", null, [ver]);
  const silences = useAPI("/api/v2/silences", null, [ver]);
  const notes = useAPI("/api/v2/notifications", { limit: "50" }, [ver]);
  // The next daily digest of P2 alerts (404 when alerting is off: no digest).
  const digest = useAPI("/api/v1/appliance/digest/preview", null, [ver], { alerts: [] });
  const dg = digest.data || {};
  const dgAlerts = dg.alerts || [];
  // Warm-up: a pending alert of a rule with a warm-up whose instance is
  // warming is held, not just pending.
  const rules = useAPI("/api/v1/rules", { type: "alert" }, [ver]);
  const warming = useQueryTable("appliance_instance_warming == 1");
  const warmupOf = {};
  for (const g of (rules.data && rules.data.groups) || []) for (const r of g.rules || []) if (r.warmup > 0) warmupOf[r.name] = r.warmup;
  const warmInst = new Set((warming.data || []).map((r) => r.metric.instance));
  const held = (a) => warmupOf[a.labels.alertname] > 0 && (warmInst.has(a.labels.instance) || (a.breachingInstances || []).some((i) => warmInst.has(i)));
  const done = () => { setForm(null); setVer(ver + 1); };
  const expire = async (id) => { await api("/api/v2/silence/" + encodeURIComponent(id), null, { method: "DELETE" }).catch(() => {}); setVer(ver + 1); };
  const fromAlert = (labels) => setForm(Object.keys(labels).filter((k) => !HIDE.has(k)).sort().map((k) => ({ name: k, value: labels[k], isRegex: false, isEqual: true })));
  const gs = groups.data || [];
  const pend = ((pending.data && pending.data.alerts) || []).filter((a) => a.state === "pending");
  const sil = silences.data || [];
  const log = Array.isArray(notes.data) ? notes.data : (notes.data && notes.data.notifications) || [];
  return html`<h1>Alerts</h1>
    <div class="bar"><button data-testid="silence-new" onClick=${() => setForm([])}>new silence</button></div>
    ${form && html`<${SilenceForm} key=${JSON.stringify(form)} init=${form} onDone=${done} />`}
    <${ListPanel} id="alert-groups" title="Firing (grouped as Alertmanager groups them)" st=${groups} rows=${gs.length}>
      ${gs.map((g) => html`<div class="group"><div class="ghead">${labelsText(g.labels) || "(all)"} <span class="meta">→ ${g.receiver.name}</span></div>
        <table><tbody>${g.alerts.map((a) => html`<tr data-alert=${a.fingerprint}><td><span class=${"sev " + (a.labels.severity || "")}>${a.labels.severity || "–"}</span></td>
          <td>${a.labels.alertname}</td><td>${a.labels.instance || a.annotations.breaching_instances || ""}</td><td>since ${fmtAgo(a.startsAt)}</td><td>${a.status.state}${a.status.silencedBy.length ? " (silenced)" : ""}</td>
          <td>${a.annotations.summary || ""}</td><td>${a.generatorURL && html`<a href=${explorePath(a.generatorURL)}>query</a>`}${a.labels.job && (a.labels.model_name || a.labels.model) && html` <a data-testid="explain-alert" href=${withParams({ job: a.labels.job, model: a.labels.model_name || a.labels.model || "", instance: a.labels.instance || "", at: String(Math.floor(Date.parse(a.startsAt) / 1000)) }, "/model")}>explain</a>`}</td>
          <td><button class="link" data-testid="silence-alert" onClick=${() => fromAlert(a.labels)}>silence</button></td></tr>`)}</tbody></table></div>`)}
    </${ListPanel}>
    <${ListPanel} id="pending" title="Pending (and held by warm-up)" st=${pending} rows=${pend.length}>
      <table><tbody>${pend.map((a) => html`<tr><td><span class=${"sev " + (a.labels.severity || "")}>${a.labels.severity || "–"}</span></td><td>${a.labels.alertname}</td><td>${a.labels.instance || ""}</td>
        <td>since ${fmtAgo(a.activeAt)}</td><td>${a.annotations && a.annotations.summary}</td><td>${held(a) ? "held by warm-up" : ""}</td></tr>`)}</tbody></table>
    </${ListPanel}>
    <${ListPanel} id="silences" title="Silences" st=${silences} rows=${sil.length}>
      <table><thead><tr><th>state</th><th>matchers</th><th>ends</th><th>by</th><th>comment</th><th></th></tr></thead>
      <tbody>${sil.map((s) => html`<tr data-silence=${s.id} data-silence-state=${s.status.state}><td>${s.status.state}</td><td>${s.matchers.map(matcherText).join(", ")}</td>
        <td>${fmtTime(Date.parse(s.endsAt) / 1000)}</td><td>${s.createdBy}</td><td>${s.comment}</td>
        <td>${s.status.state !== "expired" && html`<button class="link" data-testid="silence-expire" onClick=${() => expire(s.id)}>expire</button>`}</td></tr>`)}</tbody></table>
    </${ListPanel}>
    <${ListPanel} id="digest-preview" title="Next P2 digest" st=${digest} rows=${dgAlerts.length}
      extra=${dg.at && html`<span class="meta" data-testid="digest-at" data-at=${dg.at}>goes out ${fmtTime(Date.parse(dg.at) / 1000)} to ${(dg.receivers || []).join(", ") || "no receiver"}</span>`}>
      <div class="digest-title" data-testid="digest-title">${dg.title}</div>
      <table><thead><tr><th>severity</th><th>alert</th><th>job</th><th>instance</th><th>state</th><th>since</th></tr></thead>
      <tbody>${dgAlerts.map((a) => html`<tr data-digest-alert=${a.labels.alertname || ""}><td><span class=${"sev " + (a.labels.severity || "")}>${a.labels.severity || "–"}</span></td>
        <td>${a.labels.alertname}</td><td>${a.labels.job || ""}</td><td>${a.labels.instance || ""}</td><td>${a.status}</td><td>${fmtAgo(a.startsAt)}</td></tr>`)}</tbody></table>
      <pre class="digest" data-testid="digest-text">${dg.text}</pre>
    </${ListPanel}>
    <${ListPanel} id="notifications" title="Notification log" st=${notes} rows=${log.length}>
      <div class="scroll"><table><thead><tr><th>time</th><th>receiver</th><th>status</th><th>alerts</th><th>detail</th></tr></thead>
      <tbody>${log.map((n) => html`<tr><td>${fmtTime(Date.parse(n.time || n.sentAt || n.at) / 1000)}</td><td>${n.receiver}</td><td>${n.status || n.outcome || ""}</td>
        <td>${(n.alerts && n.alerts.length) ?? n.count ?? ""}</td><td>${n.error || n.group || n.groupKey || ""}</td></tr>`)}</tbody></table></div>
    </${ListPanel}>`;
}

// explorePath turns a rule's generator link into this app's /explore.
function explorePath(u) {
  try {
    const url = new URL(u, location.href);
    const expr = url.searchParams.get("g0.expr") || url.searchParams.get("expr");
    return expr ? withParams({ expr }, "/explore") : "/explore";
  } catch { return "/explore"; }
}

// ---- explore ----

function Explore({ p }) {
  const ctx = useContext(PageCtx);
  const expr = p.get("expr") || "";
  const tab = p.get("tab") || "graph";
  const [text, setText] = useState(expr);
  const [st, setSt] = useState({ state: expr ? "loading" : "idle" });
  const [showAll, setShowAll] = useState(false);
  const [nonce, setNonce] = useState(0);
  const box = useRef(null);
  useEffect(() => setText(expr), [expr]);
  const key = JSON.stringify([expr, tab, ctx.rangeKey, nonce]);
  const last = useRef("");
  useEffect(() => {
    if (!ctx.scrapeKnown) return undefined;
    if (last.current !== key) setSt({ state: expr ? "loading" : "idle" });
    last.current = key;
    if (!expr) return;
    const ac = new AbortController();
    const width = box.current ? box.current.clientWidth : 900;
    const step = Math.max(ctx.scrape, Math.ceil((ctx.end - ctx.start) / Math.max(50, width / 2)));
    const t0 = performance.now();
    const q = tab === "table" ? instantQuery(expr, ctx.end, ac.signal) : rangeQuery(expr, ctx.start, ctx.end, step, ac.signal);
    q.then((r) => setSt({ state: (r.series || r.result).length ? "ready" : "empty", r, step, ms: performance.now() - t0 }))
      .catch((e) => { if (!isAbort(e)) setSt({ state: "error", error: e.message }); });
    return () => ac.abort();
  }, [key, ctx.tick, ctx.scrapeKnown]);
  const run = (v) => (v !== expr ? navigate(withParams({ expr: v })) : setNonce(nonce + 1));
  const r = st.r;
  // A heatmap draws every bucket; lines are capped at MAX_SERIES.
  const series = r && r.series ? (showAll || isHeatmap(r.series) ? r.series : r.series.slice(0, MAX_SERIES)) : [];
  const tiers = r ? r.tiers.join(",") : "";
  const n = r ? (r.series || r.result).length : 0;
  const state = last.current !== key ? "loading" : st.state === "idle" ? "empty" : st.state;
  const attrs = state === "ready" ? { "data-series": String(tab === "table" ? n : series.length), "data-tiers": tiers } : {};
  return html`<h1>Explore</h1>
    <${Completer} value=${text} onInput=${setText} onRun=${run} />
    <div class="bar tabs">
      ${["graph", "table"].map((t) => html`<a class=${tab === t ? "on" : ""} data-tab=${t} href=${withParams({ tab: t === "graph" ? "" : t })}>${t}</a>`)}
      ${st.state === "ready" && html`<span class="meta" data-testid="query-stats">${n} series · ${Math.round(st.ms)} ms · tiers ${tiers || "–"}${tab === "graph" ? ` · step ${st.step}s` : ""}${tab === "graph" && isHeatmap(r.series) ? " · heatmap (le)" : ""}</span>`}
    </div>
    <section class="panel wide" ref=${box} data-panel="explore" data-state=${state} ...${attrs}>
      ${st.state === "idle" && html`<div class="msg">Type a PromQL expression; Ctrl+Space completes, Enter runs.</div>`}
      ${st.state === "loading" && html`<div class="msg">loading…</div>`}
      ${st.state === "error" && html`<div class="msg err">${st.error}</div>`}
      ${st.state === "empty" && html`<div class="msg">no data</div>`}
      ${st.state === "ready" && tab === "graph" && html`<${ResultChart} xs=${r.xs} series=${series.map((s) => ({ ...s, name: legendFor("", s.metric) }))} step=${st.step} />
        ${r.series.length > MAX_SERIES && !isHeatmap(r.series) && html`<button class="link" onClick=${() => setShowAll(!showAll)}>${showAll ? `show first ${MAX_SERIES}` : `show all ${r.series.length} series`}</button>`}`}
      ${st.state === "ready" && tab === "table" && html`<div class="scroll"><table><thead><tr><th>series</th><th>value</th></tr></thead>
        <tbody>${r.result.slice(0, 500).map((x) => html`<tr><td>${legendFor("", x.metric)}</td><td class="num">${x.value[1]}</td></tr>`)}</tbody></table></div>`}
    </section>`;
}

export const PAGES = { "/": Overview, "/model": Model, "/probes": Probes, "/hardware": Hardware, "/targets": Targets, "/alerts": Alerts, "/explore": Explore, ...SLO_PAGES, ...EXPLAIN_PAGES, ...CARDINALITY_PAGES, ...PIPELINE_PAGES };

// pageFor finds a path's page: its own, else that of the longest key
// ending in "/" that the path starts with (/pipeline/<name>).
export function pageFor(path) {
  if (PAGES[path]) return PAGES[path];
  const prefix = Object.keys(PAGES).filter((k) => k.endsWith("/") && k.length > 1 && path.startsWith(k) && path.length > k.length).sort((a, b) => b.length - a.length)[0];
  return prefix ? PAGES[prefix] : null;
}
