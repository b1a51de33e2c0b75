// Unit tests of the time, step and placeholder rules (node --test).
import assert from "node:assert/strict";
import { test } from "node:test";
import { alignedEnd, chooseStep, combine, fmt, legendFor, parseDur, parseTime, promDur, rateInterval, splitBinary, substitute } from "./util.js";

test("durations", () => {
  assert.equal(parseDur("1h30m"), 5400);
  assert.equal(parseDur("90d"), 90 * 86400);
  assert.ok(isNaN(parseDur("1x")));
  assert.equal(promDur(90), "90s");
  assert.equal(promDur(300), "5m");
  assert.equal(promDur(7200), "2h");
});

test("times", () => {
  const now = 1_800_000_000;
  assert.equal(parseTime("now", now), now);
  assert.equal(parseTime("now-24h", now), now - 86400);
  assert.equal(parseTime("1800000000000", now), 1_800_000_000);
  assert.equal(parseTime("1800000000", now), 1_800_000_000);
  assert.equal(parseTime("2027-01-15T08:00:00Z", now), Date.parse("2027-01-15T08:00:00Z") / 1000);
});

test("steps keep at most width/2 points and read the tiers on long ranges", () => {
  for (const [range, width] of [[900, 960], [86400, 960], [7 * 86400, 960], [30 * 86400, 960], [90 * 86400, 1400]]) {
    const step = chooseStep(range, width, 5);
    assert.ok(range / step <= width / 2, `${range}s at ${width}px: step ${step}`);
    assert.ok(step >= 5);
  }
  // 30 days at 960 px: a step of at least 1.5 h, so the 5m tier answers.
  assert.ok(chooseStep(30 * 86400, 960, 15) >= 5400);
  assert.equal(chooseStep(900, 960, 15), 15, "never below the scrape interval");
});

test("$__rate_interval is max(4 x scrape, step)", () => {
  assert.equal(rateInterval(5, 15), 60);
  assert.equal(rateInterval(3600, 15), 3600);
});

test("placeholders", () => {
  const v = { step: 60, range: 86400, rate: 240, sel: 'job="vllm",model_name="m"' };
  assert.equal(substitute("rate(x{$sel}[$__rate_interval]) offset $__interval + $__range", v),
    'rate(x{job="vllm",model_name="m"}[4m]) offset 1m + 1d');
  assert.equal(substitute("x{$sel}", { ...v, sel: "" }), "x{}");
});

test("legends and units", () => {
  assert.equal(legendFor("{{model_name}} P95", { model_name: "llama" }), "llama P95");
  assert.equal(legendFor("", { __name__: "up", job: "a" }), 'up{job="a"}');
  assert.equal(fmt(0.25, "s"), "250 ms");
  assert.equal(fmt(0.5, "ratio"), "50.0%");
  assert.equal(fmt(2048, "bytes"), "2.00 KiB");
});

test("an expression of two other queries' answers", () => {
  const p95 = 'histogram_quantile(0.95, sum by (le) (rate(x_bucket{job="a-b/c"}[5m])))';
  const p50 = 'histogram_quantile(0.5, sum by (le) (rate(x_bucket{job="a-b/c"}[5m])))';
  assert.deepEqual(splitBinary(`${p95} - ${p50}`), { op: "-", a: p95, b: p50 });
  assert.deepEqual(splitBinary(`${p95} / ${p50}`), { op: "/", a: p95, b: p50 });
  assert.equal(splitBinary(p95), null);
  assert.equal(splitBinary(`${p95} - ${p50} > 0`), null);
  assert.equal(splitBinary(`${p95} - ${p50} / ${p95}`), null);
  assert.equal(splitBinary(`(${p95}) or vector(0)`), null);
  assert.equal(splitBinary(`${p95} - 1`), null);
  const r = (ys, metric = {}) => ({ xs: [10, 20, 30], series: ys ? [{ metric, ys }] : [], tiers: ["raw"] });
  assert.deepEqual(combine("-", r([3, null, 5]), r([1, 2, 1])), { xs: [10, 20, 30], series: [{ metric: {}, ys: [2, null, 4] }], tiers: ["raw"] });
  assert.deepEqual(combine("/", r([3, 4, 0]), r([1, 0, 0])).series[0].ys.map(String), ["3", "Infinity", "NaN"]);
  assert.deepEqual(combine("-", r(null), r([1, 2, 3])).series, []);
  assert.deepEqual(combine("-", r([null, null, null]), r([1, 2, 3])).series, []);
  assert.equal(combine("-", r([1, 2, 3], { a: "1" }), r([1, 2, 3], { a: "2" })), null);
  assert.equal(combine("-", { ...r([1]), series: [{ metric: {}, ys: [1, 2, 3] }, { metric: { x: "1" }, ys: [1, 2, 3] }] }, r([1, 2, 3])), null);
});

test("alignedEnd: the grid ends on the last multiple of the step, so successive loads share it", () => {
  assert.equal(alignedEnd(1700000123.4, 600), 1699999800);
  assert.equal(alignedEnd(1699999800, 600), 1699999800, "an aligned end stays");
  assert.equal(alignedEnd(1700000399, 600), alignedEnd(1700000123, 600), "two loads within one step ask for the same grid");
  assert.equal(alignedEnd(1700000123, 15) % 15, 0);
});
