// Pure helpers of the /compare page and the "why" panels (tested by
// comparemath.test.mjs).

// VERSION_LABELS are tried first as the label that names a version.
export const VERSION_LABELS = ["model_version", "version"];

// histogramNames returns the base names of the histograms among metric
// names (those with a _bucket series), latency-looking ones first.
export function histogramNames(names) {
  const out = names.filter((n) => n.endsWith("_bucket")).map((n) => n.slice(0, -"_bucket".length));
  const latency = (n) => /(seconds|latency|duration|_ms)$/.test(n) || /latency|duration/.test(n);
  return out.sort((a, b) => (latency(b) - latency(a)) || a.localeCompare(b));
}

// versionLabels reads a histogram's series (label sets) and returns the
// labels with two values or more, and their values: the version labels
// first, le and instance-like labels never.
export function versionLabels(series) {
  const vals = {};
  for (const s of series) {
    for (const [k, v] of Object.entries(s)) {
      if (k === "__name__" || k === "le") continue;
      (vals[k] ||= new Set()).add(v);
    }
  }
  const keys = Object.keys(vals).filter((k) => vals[k].size >= 2);
  const rank = (k) => { const i = VERSION_LABELS.indexOf(k); return i < 0 ? VERSION_LABELS.length : i; };
  keys.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  return keys.map((k) => ({ label: k, values: [...vals[k]].sort(versionOrder) }));
}

// versionOrder sorts "v2" before "v10" and plain numbers numerically.
export function versionOrder(a, b) {
  return a.localeCompare(b, undefined, { numeric: true });
}

// cdfChart merges two CDFs ([[le, fraction], ...]) onto one x axis (the
// union of the bounds, which must be positive for a log axis). A side
// without a bound keeps its previous fraction (the CDF is a step
// function between bounds).
export function cdfChart(a, b) {
  const xs = [...new Set([...a, ...b].map((p) => p[0]).filter((x) => x > 0))].sort((x, y) => x - y);
  const at = (cdf) => {
    const m = new Map(cdf.map((p) => [p[0], p[1]]));
    let last = 0;
    return xs.map((x) => (m.has(x) ? (last = m.get(x)) : last));
  };
  return { xs, ya: at(a), yb: at(b) };
}

// delta writes B − A with its sign and the relative change.
export function delta(a, b, unitFmt) {
  if (a == null || b == null || !isFinite(a) || !isFinite(b)) return "–";
  const d = b - a, sign = d > 0 ? "+" : d < 0 ? "−" : "±";
  const rel = a !== 0 ? ` (${sign}${Math.abs((100 * d) / a).toFixed(0)}%)` : "";
  return `${sign}${unitFmt(Math.abs(d))}${rel}`;
}

// stackable turns the breakdown's phases ([{name, mean: [[t, v]]}]) into
// one x axis and a row of values per phase (null where a phase has no
// point).
export function stackable(phases) {
  const xs = [...new Set(phases.flatMap((p) => p.mean.map((q) => q[0])))].sort((x, y) => x - y);
  const idx = new Map(xs.map((x, i) => [x, i]));
  const series = phases.map((p) => {
    const ys = new Array(xs.length).fill(null);
    for (const [t, v] of p.mean) if (v != null) ys[idx.get(t)] = v;
    return { name: p.name, metric: {}, ys };
  });
  return { xs, series };
}
