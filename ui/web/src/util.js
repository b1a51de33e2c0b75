// Time, units, URL state and API helpers shared by every page.

// ---- durations and times (seconds) ----
const UNIT = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, w: 604800, y: 31536000 };

export function parseDur(s) {
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)/g;
  let total = 0, m, used = 0;
  while ((m = re.exec(s))) { total += parseFloat(m[1]) * UNIT[m[2]]; used += m[0].length; }
  return used === s.length && used > 0 ? total : NaN;
}

// promDur writes seconds as a Prometheus duration ("90s", "5m").
export function promDur(sec) {
  sec = Math.max(1, Math.ceil(sec));
  if (sec % 86400 === 0) return sec / 86400 + "d";
  if (sec % 3600 === 0) return sec / 3600 + "h";
  if (sec % 60 === 0) return sec / 60 + "m";
  return sec + "s";
}

// parseTime reads "now", "now-24h", epoch seconds or ms, or an ISO date.
export function parseTime(s, now) {
  if (!s || s === "now") return now;
  if (s.startsWith("now-")) { const d = parseDur(s.slice(4)); return isNaN(d) ? NaN : now - d; }
  if (/^\d+(\.\d+)?$/.test(s)) { const n = parseFloat(s); return n > 1e11 ? n / 1000 : n; }
  const t = Date.parse(s);
  return isNaN(t) ? NaN : t / 1000;
}

export const PRESETS = ["15m", "1h", "6h", "24h", "7d", "30d", "90d"];
const NICE = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

// chooseStep keeps at most width/2 points per series and no finer than
// the scrape interval.
export function chooseStep(rangeSec, widthPx, scrapeSec) {
  const raw = Math.max(rangeSec / Math.max(50, widthPx / 2), scrapeSec || 1);
  for (const n of NICE) if (n >= raw) return n;
  return Math.ceil(raw / 86400) * 86400;
}

// rateInterval is Grafana's $__rate_interval: max(4 x scrape, step).
export const rateInterval = (step, scrapeSec) => Math.max(4 * (scrapeSec || 15), step);

// substitute fills the placeholders the dashboard definitions use.
export function substitute(expr, v) {
  return expr
    .replace(/\$__rate_interval/g, promDur(v.rate))
    .replace(/\$__interval/g, promDur(v.step))
    .replace(/\$__range/g, promDur(v.range))
    .replace(/\$sel/g, v.sel || "");
}

// ---- number formatting by unit ----
function si(v, base, units) {
  let i = 0, a = Math.abs(v);
  while (a >= base && i < units.length - 1) { a /= base; v /= base; i++; }
  return trim(v) + units[i];
}
function trim(v) {
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  if (a >= 1) return v.toFixed(2);
  return v.toPrecision(2);
}
export function fmt(v, unit) {
  if (v == null || !isFinite(v)) return v == null ? "–" : String(v);
  switch (unit) {
    case "s": return Math.abs(v) >= 1 || v === 0 ? trim(v) + " s" : trim(v * 1000) + " ms";
    case "ms": return Math.abs(v) >= 1000 ? trim(v / 1000) + " s" : trim(v) + " ms";
    case "percent": return trim(v) + "%";
    case "ratio": return trim(v * 100) + "%";
    case "bytes": return si(v, 1024, [" B", " KiB", " MiB", " GiB", " TiB"]);
    case "reqps": return trim(v) + " req/s";
    case "tokps": return trim(v) + " tok/s";
    case "celsius": return trim(v) + " °C";
    case "watts": return trim(v) + " W";
    case "mhz": return trim(v) + " MHz";
    default: return si(v, 1000, ["", "k", "M", "G", "T"]);
  }
}

export function fmtTime(sec) {
  const d = new Date(sec * 1000);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
export function fmtAgo(iso) {
  const t = Date.parse(iso);
  if (isNaN(t) || t <= 0) return "never";
  const s = (Date.now() - t) / 1000;
  if (s < 90) return Math.max(0, Math.round(s)) + "s ago";
  if (s < 5400) return Math.round(s / 60) + "m ago";
  if (s < 129600) return Math.round(s / 3600) + "h ago";
  return Math.round(s / 86400) + "d ago";
}

// ---- labels ----
export function labelsText(m, skipName) {
  const keys = Object.keys(m || {}).filter((k) => !(skipName && k === "__name__")).sort();
  const inner = keys.map((k) => `${k}=${JSON.stringify(m[k])}`).join(", ");
  return (skipName || !m?.__name__ ? "" : m.__name__) + "{" + inner.replace(/__name__="[^"]*",? ?/, "") + "}";
}
export function legendFor(tpl, m) {
  if (tpl) return tpl.replace(/\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}/g, (_, k) => m[k] ?? "");
  const keys = Object.keys(m).filter((k) => k !== "__name__");
  if (!keys.length) return m.__name__ || "value";
  return (m.__name__ || "") + "{" + keys.sort().map((k) => `${k}="${m[k]}"`).join(",") + "}";
}
export const num = (s) => {
  const v = parseFloat(s);
  return isFinite(v) ? v : null;
};

// ---- API ----
export class APIError extends Error {}

// api fetches a JSON endpoint of the appliance and returns
// {data, tiers} (tiers from the X-Appliance-Tiers header or the body).
export async function api(path, params, opts = {}) {
  const qs = params ? "?" + new URLSearchParams(params).toString() : "";
  const resp = await fetch(path + qs, { signal: opts.signal, method: opts.method || "GET", headers: opts.body ? { "Content-Type": "application/json" } : undefined, body: opts.body ? JSON.stringify(opts.body) : undefined, credentials: "same-origin" });
  const text = await resp.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { /* plain text */ }
  if (!resp.ok || (body && body.status === "error")) {
    const msg = (body && (body.error || (typeof body === "string" ? body : ""))) || text.trim() || resp.statusText;
    const e = new APIError(`${resp.status}: ${msg}`);
    e.status = resp.status;
    throw e;
  }
  const hdr = resp.headers.get("X-Appliance-Tiers");
  const tiers = hdr ? hdr.split(",") : (body && body.tiers) || [];
  const data = body && body.status === "success" && "data" in body ? body.data : body;
  return { data, tiers };
}

export const isAbort = (e) => e && e.name === "AbortError";

// ---- URL state ----
export function params() { return new URLSearchParams(location.search); }
export function withParams(set, path = location.pathname) {
  const p = params();
  for (const [k, v] of Object.entries(set)) {
    if (v == null || v === "") p.delete(k); else p.set(k, v);
  }
  const s = p.toString();
  return path + (s ? "?" + s : "");
}

// navigate changes the URL without a reload; the app re-renders on it.
export function navigate(url, replace) {
  history[replace ? "replaceState" : "pushState"](null, "", url);
  dispatchEvent(new Event("app:navigate"));
}

// ---- answers one panel can take from another's ----

// splitBinary splits "A - B" or "A / B", where A and B are calls or
// selectors (no other operator outside brackets), into {op, a, b}; null
// for anything else.
export function splitBinary(expr) {
  let depth = 0, quote = null, top = "", at = -1, ops = 0;
  for (let i = 0; i < expr.length; i++) {
    const c = expr[i];
    if (quote) { if (c === "\\") i++; else if (c === quote) quote = null; continue; }
    if (c === '"' || c === "'" || c === "`") { quote = c; continue; }
    if ("({[".includes(c)) { depth++; continue; }
    if (")}]".includes(c)) { depth--; continue; }
    if (depth !== 0) continue;
    top += c;
    if (c === "-" || c === "/") { at = i; ops++; }
  }
  if (ops !== 1 || !/^\s*[A-Za-z_:][\w:]*\s*[-/]\s*[A-Za-z_:][\w:]*\s*$/.test(top)) return null;
  return { op: expr[at], a: expr.slice(0, at).trim(), b: expr.slice(at + 1).trim() };
}

const labelKey = (m) => JSON.stringify(Object.keys(m).sort().map((k) => [k, m[k]]));

// combine applies op ("-" or "/") step by step to two range answers on
// the same grid (rangeQuery's shape) as PromQL does to two one-series
// vectors with the same labels: a step missing on either side is missing.
// It returns null where PromQL's vector matching could differ (more than
// one series on a side, other labels, another grid).
export function combine(op, a, b) {
  if (a.series.length > 1 || b.series.length > 1 || a.xs.length !== b.xs.length || a.xs[0] !== b.xs[0]) return null;
  const tiers = [...new Set([...(a.tiers || []), ...(b.tiers || [])])];
  if (!a.series.length || !b.series.length) return { xs: a.xs, series: [], tiers };
  const [sa, sb] = [a.series[0], b.series[0]];
  if (labelKey(sa.metric) !== labelKey(sb.metric)) return null;
  const f = op === "-" ? (x, y) => x - y : (x, y) => x / y;
  const ys = sa.ys.map((x, i) => (x == null || sb.ys[i] == null ? null : f(x, sb.ys[i])));
  return { xs: a.xs, series: ys.some((y) => y != null) ? [{ metric: sa.metric, ys }] : [], tiers };
}
