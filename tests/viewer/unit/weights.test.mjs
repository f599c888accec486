// Where a graph's parameters came from, in words (viewer/static/model/weights.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { describeState } from "../../../viewer/static/model/weights.js";

const cases = [
  [{ meta: { state: "fresh_init" }, recipe: { seed: 3 } }, "fresh", /^Freshly initialized parameters \(seed 3\), not trained weights\.$/],
  [{ meta: { state: "checkpoint", checkpoint: "runs/best.pt" } }, "checkpoint", /^Trained weights from runs\/best\.pt/],
  [{ meta: { state: "abstract" } }, "abstract", /^Abstract: no weights\./],
  [{ meta: { state: "factory_state" }, recipe: { init: { factory: "setup:build" } } }, "factory", /workspace factory setup:build/],
  [{ meta: { state: "module_instance" } }, "carried", /module-level instance/],
  [{ meta: { state: "something_new" } }, "other", /^Parameter state: something new\.$/],
];

for (const [capture, origin, headline] of cases) {
  test(`state ${capture.meta.state}`, () => {
    const said = describeState(capture);
    assert.equal(said.origin, origin);
    assert.match(said.headline, headline);
  });
}

test("no state recorded, nothing said", () => {
  assert.equal(describeState({ meta: {} }), null);
  assert.equal(describeState(null), null);
});

test("a non-strict checkpoint lists what it did not match", () => {
  const said = describeState({
    meta: { state: "checkpoint", checkpoint: "w.pt", checkpoint_strict: false, checkpoint_missing: ["a"], checkpoint_unexpected: ["b", "c"] },
  });
  assert.match(said.headline, /1 key missing .* 2 unexpected keys ignored/);
  assert.deepEqual(said.keys, { missing: ["a"], unexpected: ["b", "c"] });
});

test("the worker's own note becomes a sentence", () => {
  assert.equal(describeState({ meta: { state: "fresh_init", state_note: "built here" } }).note, "Built here.");
});
