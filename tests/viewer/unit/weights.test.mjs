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
  [{ meta: { state: "fresh_init" } }, "fresh", /^Freshly initialized parameters \(the profile seed\)/],
  [{ meta: { state: "checkpoint_checked", checkpoint: "w.pt" } }, "abstract", /^Abstract: no weights\. The names and shapes of w\.pt were checked/],
  [{ meta: { state: "checkpoint_checked" } }, "abstract", /names and shapes of the checkpoint were checked/],
  [{ meta: { state: "factory_state", state_abstract: true }, recipe: { init: { factory: "m:f" } } }, "abstract", /^Abstract: no weights\. The state built by the workspace factory m:f holds/],
  [{ meta: { state: "fresh_init", state_abstract: true } }, "abstract", /state built by its own code holds shapes/],
  [{ meta: { state: "checkpoint" } }, "checkpoint", /^Trained weights from a checkpoint, not/],
  [{ meta: { state: "constructed" } }, "fresh", /built by the constructor from the literal init/],
  [{ meta: { state: "factory_variables" } }, "factory", /^Weights from the workspace factory \(bound with model\.bind\(variables\)\)/],
  [{ meta: { state: "callable_state" }, recipe: { init: { factory: "m:f" } } }, "factory", /workspace factory m:f \(the state of the NNX modules its callable carries\)/],
  [{ meta: { state: "callable_state" } }, "carried", /^Weights: the state of the NNX modules the function itself carries/],
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
  // The counts the worker recorded win over the lists it kept (cut short); strict loads list nothing.
  const counted = describeState({ meta: { state: "checkpoint", checkpoint: "w.pt", checkpoint_strict: false, checkpoint_missing: ["a"], checkpoint_counts: { missing: 40, unexpected: 0 } } });
  assert.match(counted.headline, /\(strict = false: 40 keys missing \(kept at initialization\)\)\.$/);
  const strict = describeState({ meta: { state: "checkpoint", checkpoint: "w.pt", checkpoint_missing: ["a"] } });
  assert.equal(strict.headline, "Trained weights from w.pt, not TensorViz's initialization.");
  assert.equal(strict.keys, undefined);
});

test("the worker's own note becomes a sentence", () => {
  assert.equal(describeState({ meta: { state: "fresh_init", state_note: "built here" } }).note, "Built here.");
});
