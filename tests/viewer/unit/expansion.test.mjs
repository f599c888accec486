// What opens and closes (viewer/static/model/expansion.js), on a graph model of our own:
// the functions read and change only the fields GraphState names.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ROOT } from "../../../viewer/static/model/items.js";
import {
  TrackedSet, collapseAll, expandToDepth, isInside, opensThrough, toggle, unfold,
} from "../../../viewer/static/model/expansion.js";

// root ─ g1 ─ g2 ─ n5 ; root ─ g3 (a function call drawn as its op n6, wrapped by g4)
function model() {
  const m = {
    changes: 0,
    changed() { m.changes++; },
    deferred: new Set(),
    unfolded: new Set(),
    openAll: false,
    itemOf: new Map([["g3", { type: "group", id: 3, card: "op", single: { key: "n6" }, wrappers: [{ key: "g4" }, { key: "g3" }] }]]),
    scene: {
      byKey: new Map([
        ["g1", { parentKey: ROOT }], ["g2", { parentKey: "g1" }], ["n5", { parentKey: "g2" }], ["g3", { parentKey: ROOT }],
      ]),
    },
    containers: new Map(),
    openable: (key) => key !== "n5",
    load: async (key) => pages[key],
  };
  m.expanded = new TrackedSet(m, [ROOT]);
  return m;
}

const pages = {
  [ROOT]: { items: [{ type: "group", id: 1, child_count: 1 }, { type: "group", id: 3, card: "function", child_count: 1 }], stacks: [] },
  g1: { items: [{ type: "group", id: 2, child_count: 1 }], stacks: [{ key: "sg2", members: [["g2"]] }] },
  g2: { items: [{ type: "node", id: 5 }], stacks: [] },
};

test("a tracked set tells its owner of real changes only", () => {
  const m = model();
  m.expanded.add("g1");
  m.expanded.add("g1");
  m.expanded.delete("g9");
  assert.equal(m.changes, 1);
  m.expanded.delete("g1");
  m.expanded.clear();
  assert.equal(m.changes, 3);
  m.expanded.clear();
  assert.equal(m.changes, 3);
});

test("closing a container closes what is open inside it", () => {
  const m = model();
  assert.ok(toggle(m, "g1"));
  assert.ok(toggle(m, "g2"));
  assert.deepEqual([...m.expanded].sort(), [ROOT, "g1", "g2"].sort());
  assert.ok(isInside(m, "g2", "g1") && isInside(m, "n5", "g1") && !isInside(m, "g1", "g2"));
  toggle(m, "g1");
  assert.deepEqual([...m.expanded], [ROOT]);
});

test("what does not open is refused", () => {
  const m = model();
  assert.equal(toggle(m, "n5"), false);
  assert.deepEqual([...m.expanded], [ROOT]);
});

test("a module drawn as one call's card opens through its wrappers to the call, each once", () => {
  const m = model();
  assert.deepEqual(opensThrough(m, "g3"), ["g4", "g3", "n6"]);
  assert.deepEqual(opensThrough(m, "g1"), ["g1"]);
  m.deferred.add("g4");
  toggle(m, "g3");
  assert.ok(m.expanded.has("g4") && m.expanded.has("n6") && !m.deferred.has("g4"));
});

test("a stack unfolds with its first repetition's containers open", () => {
  const m = model();
  m.containers.set("g1", pages.g1);
  unfold(m, "sg2");
  assert.ok(m.unfolded.has("sg2"));
  assert.deepEqual([...m.expanded].sort(), [ROOT, "g2"].sort());
});

test("Depth… opens groups level by level, not function calls, and unfolds stacks on the way", async () => {
  const m = model();
  m.expanded.add("g3");
  await expandToDepth(m, 1);
  assert.deepEqual([...m.expanded].sort(), [ROOT, "g1"].sort());
  await expandToDepth(m, 2);
  assert.deepEqual([...m.expanded].sort(), [ROOT, "g1", "g2"].sort());
  assert.ok(m.unfolded.has("sg2"));
});

test("Collapse leaves the root alone open", () => {
  const m = model();
  m.openAll = true;
  toggle(m, "g1");
  m.unfolded.add("sg2");
  collapseAll(m);
  assert.deepEqual([...m.expanded], [ROOT]);
  assert.equal(m.openAll, false);
  assert.equal(m.unfolded.size, 0);
});
