import { test } from "node:test";
import assert from "node:assert/strict";
import { cdfChart, delta, histogramNames, stackable, versionLabels } from "./comparemath.js";

test("histogramNames keeps histograms, latency first", () => {
  assert.deepEqual(histogramNames(["a_total", "vllm:request_prompt_tokens_bucket", "vllm:e2e_request_latency_seconds_bucket", "up"]),
    ["vllm:e2e_request_latency_seconds", "vllm:request_prompt_tokens"]);
});

test("versionLabels puts version labels first and drops single values", () => {
  const got = versionLabels([
    { __name__: "x_bucket", le: "1", job: "a", model_version: "v10", instance: "i1" },
    { __name__: "x_bucket", le: "2", job: "a", model_version: "v2", instance: "i2" },
  ]);
  assert.deepEqual(got, [{ label: "model_version", values: ["v2", "v10"] }, { label: "instance", values: ["i1", "i2"] }]);
});

test("cdfChart merges bounds and holds steps", () => {
  const { xs, ya, yb } = cdfChart([[0.5, 0.2], [1, 0.6]], [[1, 0.1], [2, 0.9]]);
  assert.deepEqual(xs, [0.5, 1, 2]);
  assert.deepEqual(ya, [0.2, 0.6, 0.6]);
  assert.deepEqual(yb, [0, 0.1, 0.9]);
});

test("delta signs and percent", () => {
  const f = (v) => v.toFixed(1) + " s";
  assert.equal(delta(2, 3, f), "+1.0 s (+50%)");
  assert.equal(delta(2, 1, f), "−1.0 s (−50%)");
  assert.equal(delta(null, 1, f), "–");
});

test("stackable aligns phases on one axis", () => {
  const { xs, series } = stackable([{ name: "queue", mean: [[10, 1], [20, 2]] }, { name: "decode", mean: [[20, 5]] }]);
  assert.deepEqual(xs, [10, 20]);
  assert.deepEqual(series.map((s) => s.ys), [[1, 2], [null, 5]]);
});
