// Unit tests of the SLO pages' helpers (node --test).
import assert from "node:assert/strict";
import { test } from "node:test";
import { attainmentWindow, byBudget, isoWeek } from "./slomath.js";

test("iso weeks", () => {
  assert.equal(isoWeek(new Date(2026, 10, 30)), "2026-W49"); // Monday
  assert.equal(isoWeek(new Date(2026, 10, 29)), "2026-W48"); // Sunday
  assert.equal(isoWeek(new Date(2027, 0, 3)), "2026-W53"); // 2026 has 53 weeks
  assert.equal(isoWeek(new Date(2027, 0, 4)), "2027-W01");
  assert.equal(isoWeek(new Date(2021, 0, 1)), "2020-W53");
});

test("attainment window follows the range", () => {
  assert.equal(attainmentWindow(3600), "5m");
  assert.equal(attainmentWindow(6 * 3600), "5m");
  assert.equal(attainmentWindow(24 * 3600), "5m");
  assert.equal(attainmentWindow(7 * 86400), "1h");
  assert.equal(attainmentWindow(30 * 86400), "6h");
  assert.equal(attainmentWindow(90 * 86400), "6h");
  assert.equal(attainmentWindow(400 * 86400), "3d");
});

test("statuses sort by budget left, no traffic last", () => {
  const got = byBudget([{ slo: "c", budget_left: null }, { slo: "b", budget_left: 0.9 }, { slo: "a", budget_left: -0.2 }, { slo: "d", budget_left: null }]);
  assert.deepEqual(got.map((s) => s.slo), ["a", "b", "c", "d"]);
});
