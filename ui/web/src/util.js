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

// alignedEnd is the last multiple of step (seconds) at or before end:
// where a range query's grid ends (rangeQuery in chart.js).
export const alignedEnd = (end, step) => Math.floor(Math.round(end) / step) * step;

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

// The answers the server wrote into index.html for this page's first
// requests (ui/boot.go): each taken once, by the first api() call for
// the same path and parameters, in place of a fetch.
const bootAnswers = (() => {
  const el = typeof document !== "undefined" && document.getElementById("boot");
  try { return el ? JSON.parse(el.textContent) : []; } catch { return []; }
})();

// takeBoot returns the server's answer to GET path?params as api()
// does ({data, tiers}), once; null when the page holds none.
export function takeBoot(path, params) {
  const want = JSON.stringify(Object.entries(params || {}).filter(([, v]) => v !== undefined && v !== null).map(([k, v]) => [k, String(v)]).sort());
  const i = bootAnswers.findIndex((b) => b.path === path && JSON.stringify(Object.entries(b.params || {}).sort()) === want);
  if (i < 0) return null;
  const { body, tiers } = bootAnswers.splice(i, 1)[0];
  return { data: body && body.status === "success" && "data" in body ? body.data : body, tiers: tiers ? tiers.split(",") : (body && body.tiers) || [] };
}

// dropBoot forgets the answers the first render did not take, so that
// no later request gets an old one.
export function dropBoot() { bootAnswers.length = 0; }

const BOX_PATHS = /^\/api\/v1\/(query|query_range|series|labels|label\/[^/]+\/values)$/;

// api fetches a JSON endpoint of the appliance and returns
// {data, tiers} (tiers from the X-Appliance-Tiers header or the body).
export async function api(path, params, opts = {}) {
  const boot = !opts.method && !opts.body && takeBoot(path, params);
  if (boot) return boot;
  const q = new URLSearchParams(params || {});
  // The box selector (hub mode): the page's extra_label narrows its
  // PromQL, series and label queries to one box (the server adds the
  // matcher to every selector).
  if (BOX_PATHS.test(path)) for (const v of new URLSearchParams(location.search).getAll("extra_label")) q.append("extra_label", v);
  const qs = [...q.keys()].length ? "?" + q.toString() : "";
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

// ---- quantiles of one histogram, computed once per page ----

// quantileCall splits histogram_quantile(<number>, sum by (le) (...)) into
// {q, inner}; null for anything else. The Overview and model pages ask
// for several quantiles of the same histogram: the page fetches the
// inner `sum by (le)` once (at most one series per bucket) and computes
// each quantile from it (histogramQuantile), instead of the server
// evaluating the histogram once per quantile.
export function quantileCall(expr) {
  const m = /^\s*histogram_quantile\s*\(\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*,([\s\S]*)\)\s*$/.exec(expr);
  if (!m) return null;
  const inner = m[2].trim();
  if (!/^sum\s+by\s*\(\s*le\s*\)\s*\(/.test(inner) || !balanced(inner)) return null;
  return { q: parseFloat(m[1]), inner };
}

// balanced tells whether expr's brackets close in order, outside quotes.
function balanced(expr) {
  let depth = 0, quote = null;
  for (let i = 0; i < expr.length; i++) {
    const c = expr[i];
    if (quote) { if (c === "\\") i++; else if (c === quote) quote = null; continue; }
    if (c === '"' || c === "'" || c === "`") { quote = c; continue; }
    if ("({[".includes(c)) depth++;
    else if (")}]".includes(c) && --depth < 0) return false;
  }
  return depth === 0 && !quote;
}

// parseLe reads an `le` bound written in one of the forms exporters
// write ("0.5", "1e-3", "+Inf"), as Go's strconv.ParseFloat does; null
// for anything else (Go's hex floats, a missing label, NaN).
function parseLe(s) {
  if (typeof s !== "string") return null;
  if (/^[+-]?inf(inity)?$/i.test(s)) return s[0] === "-" ? -Infinity : Infinity;
  return /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s) ? Number(s) : null;
}

// almostEqual is Prometheus' util/almost.Equal.
const MIN_NORMAL = 2.2250738585072014e-308;
function almostEqual(a, b, epsilon) {
  if (Number.isNaN(a) && Number.isNaN(b)) return true;
  if (a === b) return true;
  const absSum = Math.abs(a) + Math.abs(b), diff = Math.abs(a - b);
  if (a === 0 || b === 0 || absSum < MIN_NORMAL) return diff < epsilon * MIN_NORMAL;
  return diff / Math.min(absSum, Number.MAX_VALUE) < epsilon;
}

// bucketQuantile is Prometheus' promql.BucketQuantile (v0.316), step for
// step in the same float64 arithmetic, so the answer is the server's:
// buckets [{ub, count}] in any order.
export function bucketQuantile(q, buckets) {
  if (Number.isNaN(q)) return NaN;
  if (q < 0) return -Infinity;
  if (q > 1) return Infinity;
  if (!buckets.length) return NaN;
  buckets = buckets.map((b) => ({ ...b })).sort((a, b) => (a.ub < b.ub ? -1 : a.ub > b.ub ? 1 : 0));
  if (buckets[buckets.length - 1].ub !== Infinity) return NaN;
  // coalesceBuckets
  const co = [];
  for (const b of buckets) {
    const last = co[co.length - 1];
    if (last && last.ub === b.ub) last.count += b.count; else co.push({ ...b });
  }
  // ensureMonotonicAndIgnoreSmallDeltas, tolerance 1e-12
  let prev = co[0].count;
  for (let i = 1; i < co.length; i++) {
    const curr = co[i].count;
    if (curr === prev) continue;
    if (almostEqual(prev, curr, 1e-12) || curr < prev) { co[i].count = prev; continue; }
    prev = curr;
  }
  if (co.length < 2) return NaN;
  const observations = co[co.length - 1].count;
  if (observations === 0) return NaN;
  let rank = q * observations;
  let b = 0, hi = co.length - 1; // sort.Search over all but +Inf
  while (b < hi) {
    const h = (b + hi) >>> 1;
    if (co[h].count >= rank) hi = h; else b = h + 1;
  }
  if (b === co.length - 1) return co[co.length - 2].ub;
  if (b === 0 && co[0].ub <= 0) return co[0].ub;
  let start = 0, count = co[b].count;
  const end = co[b].ub;
  if (b > 0) { start = co[b - 1].ub; count -= co[b - 1].count; rank -= co[b - 1].count; }
  return start + (end - start) * (rank / count);
}

// histogramQuantile is histogram_quantile(q, ·) over a range answer of
// bucket series (rangeQuery's shape, values parsed with parseFloat so NaN
// stays NaN): per step, per group of series that differ only in `le`,
// the quantile of the buckets present at that step. A group with no
// bucket at a step has no point there; a NaN quantile (no observations)
// reads as null, as num() reads the server's "NaN". Series without an
// `le` in those forms make it null: the caller asks the server instead.
export function histogramQuantile(q, a) {
  const groups = new Map();
  for (const s of a.series) {
    const ub = parseLe(s.metric.le);
    if (ub === null) return null;
    const metric = {};
    for (const [k, v] of Object.entries(s.metric)) if (k !== "le" && k !== "__name__") metric[k] = v;
    const key = labelKey(metric);
    if (!groups.has(key)) groups.set(key, { metric, list: [] });
    groups.get(key).list.push({ ub, ys: s.ys });
  }
  const series = [];
  for (const { metric, list } of groups.values()) {
    let any = false;
    const ys = a.xs.map((_, i) => {
      const buckets = [];
      for (const b of list) if (b.ys[i] != null) buckets.push({ ub: b.ub, count: b.ys[i] });
      if (!buckets.length) return null;
      any = true;
      const v = bucketQuantile(q, buckets);
      return isFinite(v) ? v : null;
    });
    if (any) series.push({ metric, ys });
  }
  return { xs: a.xs, series, tiers: a.tiers };
}

