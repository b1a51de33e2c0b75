// Pure helpers of the SLO pages (tested by slomath.test.mjs).

// BURN_WINDOWS are the windows slo/ records slo:sli_error:ratio_rate<w>
// for, shortest first (the keys of a status's burn_rates).
export const BURN_WINDOWS = ["5m", "30m", "1h", "2h", "6h", "1d", "3d"];

// attainmentWindow picks the recorded error-ratio window that suits a
// range: about a hundredth of it, so the line neither jitters nor hides
// the range's shape.
export function attainmentWindow(rangeSec) {
  const secs = { "5m": 300, "30m": 1800, "1h": 3600, "2h": 7200, "6h": 21600, "1d": 86400, "3d": 259200 };
  let best = BURN_WINDOWS[0];
  for (const w of BURN_WINDOWS) if (secs[w] <= rangeSec / 100) best = w;
  return best;
}

// byBudget sorts statuses by budget left, least first; no budget (no
// traffic) last.
export function byBudget(list) {
  const key = (s) => (s.budget_left == null ? Infinity : s.budget_left);
  return [...list].sort((a, b) => key(a) - key(b) || a.slo.localeCompare(b.slo));
}

// isoWeek is the ISO 8601 week ("2026-W49") of a date, in the browser's
// time zone.
export function isoWeek(d) {
  const t = new Date(Date.UTC(d.getFullYear(), d.getMonth(), d.getDate()));
  const day = t.getUTCDay() || 7;
  t.setUTCDate(t.getUTCDate() + 4 - day);
  const y = t.getUTCFullYear();
  const n = Math.ceil(((t - Date.UTC(y, 0, 1)) / 86400000 + 1) / 7);
  return `${y}-W${String(n).padStart(2, "0")}`;
}

