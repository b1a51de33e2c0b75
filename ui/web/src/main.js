// The appliance's dashboard: shell (navigation, time range, refresh,
// theme), router and the page context every chart reads.
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { html } from "htm/preact";
import { render } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import { PageCtx, rangeQuery } from "./chart.js";
import { pageFor } from "./pages.js";
import { api, dropBoot, navigate, takeBoot, params, parseDur, parseTime, PRESETS, withParams } from "./util.js";

const NAV = [["/", "Overview"], ["/model", "Model"], ["/probes", "Probes"], ["/hardware", "Hardware"], ["/targets", "Targets"], ["/alerts", "Alerts"], ["/slo", "SLOs"], ["/reports", "Reports"], ["/compare", "Compare"], ["/cardinality", "Cardinality"], ["/pipeline", "Pipelines"], ["/explore", "Explore"]];
const REFRESH = ["off", "5s", "15s", "30s", "1m", "5m"];


function useLocation() {
  const [loc, setLoc] = useState(location.pathname + location.search);
  useEffect(() => {
    const on = () => setLoc(location.pathname + location.search);
    addEventListener("popstate", on);
    addEventListener("app:navigate", on);
    return () => { removeEventListener("popstate", on); removeEventListener("app:navigate", on); };
  }, []);
  return loc;
}

// Links inside the app navigate without a reload.
function onClick(e) {
  const a = e.target.closest && e.target.closest("a[href]");
  if (!a || a.target || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  const u = new URL(a.href, location.href);
  if (u.origin !== location.origin || !pageFor(u.pathname)) return;
  e.preventDefault();
  navigate(u.pathname + u.search);
}

function theme() {
  return localStorage.getItem("theme") || (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
}

// useScrapeInterval reads the global scrape interval from the running
// config (for $__rate_interval); 15s when it cannot be read.
function useScrapeInterval() {
  const interval = ({ data }) => {
    const m = /scrape_interval:\s*"?([0-9a-z.]+)/.exec((data && data.yaml) || "");
    const d = m ? parseDur(m[1]) : NaN;
    return isNaN(d) ? 15 : d;
  };
  // Known at the first render when the page holds the answer (ui/boot.go).
  const [s, setS] = useState(() => { const b = takeBoot("/api/v1/status/config"); return b ? interval(b) : null; });
  useEffect(() => {
    if (s != null) return;
    api("/api/v1/status/config").then((r) => setS(interval(r))).catch(() => setS(15));
  }, []);
  return s;
}

// spans turns 0/1 series into [start, end) intervals.
function spans(res, kind, step) {
  const out = [];
  for (const s of res.series) {
    let start = null;
    s.ys.forEach((v, i) => {
      if (v && start == null) start = res.xs[i];
      if ((!v || i === s.ys.length - 1) && start != null) {
        out.push({ time: start, end: v ? res.xs[i] + step : res.xs[i], kind, severity: s.metric.severity, labels: s.metric, text: s.metric.alertname || s.metric.instance || "" });
        start = null;
      }
    });
  }
  return out;
}

// useAnnotations reads warm-up spans, firing alerts and restarts for the
// page's range: from /api/v1/appliance/annotations, or (when the
// appliance has no such endpoint) from the series themselves.
function useAnnotations(start, end, tick, scrape) {
  const [anns, setAnns] = useState([]);
  useEffect(() => {
    if (scrape == null) return;
    const ac = new AbortController();
    api("/api/v1/appliance/annotations", { from: Math.floor(start), to: Math.ceil(end) }, { signal: ac.signal })
      .then(({ data }) => setAnns(Array.isArray(data) ? data : []))
      .catch(async (e) => {
        if (e.name === "AbortError") return;
        const step = Math.max(scrape, Math.ceil((end - start) / 500));
        try {
          const [w, a, r] = await Promise.all([
            rangeQuery("max by (instance) (appliance_instance_warming) > 0", start, end, step, ac.signal),
            rangeQuery('max by (alertname, severity) (ALERTS{alertstate="firing"})', start, end, step, ac.signal),
            rangeQuery(`changes(process_start_time_seconds[${Math.max(step, 2 * scrape)}s]) > 0`, start, end, step, ac.signal),
          ]);
          const restarts = spans(r, "restart", step).map((x) => ({ ...x, end: x.time }));
          setAnns([...spans(w, "warmup", step), ...spans(a, "alert", step), ...restarts]);
        } catch (e2) { if (e2.name !== "AbortError") setAnns([]); }
      });
    return () => ac.abort();
  }, [Math.floor(start), Math.floor(end), tick, scrape]);
  return anns;
}

// useReady sets data-ready="true" on the root once nothing on the page is
// loading and every panel is ready or empty.
function useReady(loc) {
  useEffect(() => {
    const root = document.getElementById("app");
    // Time to ready counts from the navigation start on a page load, from
    // the URL change on a navigation inside the app.
    const t0 = root.dataset.readyMs === undefined && root.dataset.ready === undefined ? 0 : performance.now();
    delete root.dataset.readyMs;
    root.dataset.ready = "false";
    const check = () => {
      const panels = root.querySelectorAll("[data-panel]");
      const busy = root.querySelector("[data-loading]");
      const ok = !busy && [...panels].every((p) => p.dataset.state === "ready" || p.dataset.state === "empty");
      // data-ready-ms: how long the page took to become ready (for
      // benchmarks).
      if (ok && root.dataset.ready !== "true" && !root.dataset.readyMs) root.dataset.readyMs = String(Math.round(performance.now() - t0));
      root.dataset.ready = String(ok);
    };
    const mo = new MutationObserver(check);
    mo.observe(root, { subtree: true, childList: true, attributes: true, attributeFilter: ["data-state", "data-loading"] });
    check();
    return () => mo.disconnect();
  }, [loc]);
}

function TimePicker({ p, zoomed }) {
  const from = p.get("from") || "now-1h", to = p.get("to") || "now";
  const now = Date.now() / 1000;
  const local = (s) => {
    const d = new Date(parseTime(s, now) * 1000 - new Date().getTimezoneOffset() * 60000);
    return isNaN(d) ? "" : d.toISOString().slice(0, 16);
  };
  const [a, setA] = useState(local(from)), [b, setB] = useState(local(to));
  useEffect(() => { setA(local(from)); setB(local(to)); }, [from, to]);
  const apply = (e) => {
    e.preventDefault();
    const fa = Date.parse(a), fb = Date.parse(b);
    if (!isNaN(fa) && !isNaN(fb) && fb > fa) navigate(withParams({ from: String(fa), to: String(fb) }));
  };
  return html`<div class="picker" data-testid="time-picker">
    ${PRESETS.map((r) => html`<button class=${from === "now-" + r && to === "now" ? "on" : ""} data-range=${r} onClick=${() => navigate(withParams({ from: "now-" + r, to: "now" }))}>${r}</button>`)}
    <form onSubmit=${apply} class="abs">
      <input type="datetime-local" name="from" value=${a} onInput=${(e) => setA(e.target.value)} />
      <span>→</span>
      <input type="datetime-local" name="to" value=${b} onInput=${(e) => setB(e.target.value)} />
      <button type="submit">apply</button>
    </form>
    ${zoomed && html`<span class="paused">refresh paused (absolute range)</span>`}
  </div>`;
}

function App() {
  const loc = useLocation();
  const [th, setTh] = useState(theme());
  const [tick, setTick] = useState(0);
  const [visible, setVisible] = useState(!document.hidden);
  const scrape = useScrapeInterval();
  const p = params();
  const path = location.pathname;
  const Page = pageFor(path) || NotFound;
  const from = p.get("from") || "now-1h", to = p.get("to") || "now";
  const relative = to === "now" && from.startsWith("now-");
  const refresh = p.get("refresh") || "30s";
  const now = useMemo(() => Date.now() / 1000, [loc, tick]);
  // The range answers of this page, range and refresh (see sharedRange).
  const queries = useMemo(() => new Map(), [loc, tick]);
  let start = parseTime(from, now), end = parseTime(to, now);
  if (!(start < end)) { start = now - 3600; end = now; }

  useEffect(() => {
    const on = () => setVisible(!document.hidden);
    document.addEventListener("visibilitychange", on);
    return () => document.removeEventListener("visibilitychange", on);
  }, []);
  // Auto-refresh: only for ranges ending now, and only while the tab is seen.
  useEffect(() => {
    const every = parseDur(refresh);
    if (!relative || !visible || isNaN(every) || refresh === "off") return;
    const id = setInterval(() => setTick((t) => t + 1), every * 1000);
    return () => clearInterval(id);
  }, [relative, visible, refresh, loc]);
  useReady(loc);
  const annotations = useAnnotations(start, end, tick, scrape);

  const sel = ["job", "instance"].filter((k) => p.get(k)).map((k) => `${k}=${JSON.stringify(p.get(k))}`).join(",");
  const ctx = {
    // scrapeKnown: charts wait for the scrape interval ($__rate_interval);
    // the page itself (and its dashboard definition) loads meanwhile.
    // rangeKey: what the panels' queries depend on besides their text
    // (the range, and the box picked: extra_label).
    start, end, rangeKey: from + "|" + to + "|" + p.getAll("extra_label").join(","), tick, theme: th, scrape: scrape || 15, scrapeKnown: scrape != null, queries, annotations, sel, syncKey: "page:" + path,
    onZoom: (a, b) => navigate(withParams({ from: String(Math.round(a * 1000)), to: String(Math.round(b * 1000)) })),
  };
  // The theme is set on <html> before the charts (created in effects, which
  // read the CSS variables) re-render.
  const toggle = () => {
    const n = th === "dark" ? "light" : "dark";
    localStorage.setItem("theme", n);
    document.documentElement.dataset.theme = n;
    setTh(n);
  };
  return html`<div class="shell" onClick=${onClick}>
    <nav>
      <span class="brand">appliance</span>
      ${NAV.map(([href, label]) => html`<a href=${withParams({}, href).replace(/[?&](expr|tab)=[^&]*/g, "")} class=${path === href || (href !== "/" && path.startsWith(href + "/")) ? "on" : ""}>${label}</a>`)}
      <span class="grow"></span>
      <${BoxPicker} />
      <select aria-label="auto-refresh" data-testid="refresh" value=${refresh} onChange=${(e) => navigate(withParams({ refresh: e.target.value === "30s" ? "" : e.target.value }))}>
        ${REFRESH.map((r) => html`<option value=${r}>${r === "off" ? "refresh off" : "every " + r}</option>`)}
      </select>
      <button data-testid="copy-link" title="copy a link to this view" onClick=${() => navigator.clipboard && navigator.clipboard.writeText(location.href).catch(() => {})}>link</button>
      <button data-testid="theme" title="dark / light" onClick=${toggle}>${th === "dark" ? "light" : "dark"}</button>
    </nav>
    <${TimePicker} p=${p} zoomed=${!relative} />
    <${PageCtx.Provider} value=${ctx}><main key=${path} data-loading=${scrape == null ? "1" : undefined}><${Page} p=${p} /></main></${PageCtx.Provider}>
  </div>`;
}

// BoxPicker is hub mode's box/fleet selector: one select per label that
// identifies a box (/api/v1/appliance/boxes; none outside hub mode). The
// choice is the URL's extra_label=<label>=<value>, which api() adds to
// the page's queries.
function BoxPicker() {
  const [boxes, setBoxes] = useState(null);
  useEffect(() => { api("/api/v1/appliance/boxes").then(({ data }) => setBoxes(data)).catch(() => setBoxes(null)); }, []);
  if (!boxes || !boxes.labels || !boxes.labels.length) return null;
  const cur = params().getAll("extra_label");
  return boxes.labels.map((l) => {
    const v = (cur.find((e) => e.startsWith(l + "=")) || "").slice(l.length + 1);
    const pick = (nv) => {
      const p = params();
      p.delete("extra_label");
      for (const e of cur) if (!e.startsWith(l + "=")) p.append("extra_label", e);
      if (nv) p.append("extra_label", l + "=" + nv);
      const s = p.toString();
      navigate(location.pathname + (s ? "?" + s : ""));
    };
    return html`<select aria-label=${"box (" + l + ")"} data-testid="box" data-box-label=${l} data-box-value=${v} value=${v} onChange=${(e) => pick(e.target.value)}>
      <option value="">all boxes (${l})</option>
      ${(boxes.values[l] || []).map((b) => html`<option value=${b} data-box=${b}>${l}=${b}</option>`)}
    </select>`;
  });
}

function NotFound() {
  return html`<div class="msg">No such page.</div>`;
}

document.documentElement.dataset.theme = theme();
render(html`<${App} />`, document.getElementById("app"));
dropBoot();
