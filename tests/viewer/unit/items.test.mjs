// The page items' keys and what opens (viewer/static/model/items.js), without a browser.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ROOT, cardOf, isContainerKey, itemKey, opens, opensWithAll } from "../../../viewer/static/model/items.js";

test("an item's key says its type", () => {
  assert.equal(itemKey({ type: "node", id: 7 }), "n7");
  assert.equal(itemKey({ type: "group", id: 3 }), "g3");
  assert.equal(itemKey({ type: "chunk", id: 5 }), "c5");
  assert.equal(ROOT, "g-1");
});

test("groups, chunks and stacks are containers; nodes are not", () => {
  for (const key of ["g3", "c5", "sg3", ROOT]) assert.ok(isContainerKey(key), key);
  for (const key of ["n7", "v1", ""]) assert.ok(!isContainerKey(key), key);
});

test("a node opens only into bodies; groups and chunks always open", () => {
  assert.ok(!opens({ type: "node", id: 1 }));
  assert.ok(!opens({ type: "node", id: 1, bodies: [] }));
  assert.ok(opens({ type: "node", id: 1, bodies: [{ role: "body" }] }));
  assert.ok(opens({ type: "group", id: 2 }));
  assert.ok(opens({ type: "chunk", id: 2 }));
});

test("the card falls back on the item's type for pages from before `card`", () => {
  assert.equal(cardOf({ type: "node", id: 1 }), "op");
  assert.equal(cardOf({ type: "group", id: 1 }), "group");
  assert.equal(cardOf({ type: "group", id: 1, card: "function" }), "function");
});

test("Expand all opens groups and chunks with children, never a function call or an empty group", () => {
  const table = [
    [{ type: "group", id: 1, child_count: 3 }, true],
    [{ type: "chunk", id: 1, child_count: 1 }, true],
    [{ type: "group", id: 1, child_count: 0 }, false],
    [{ type: "group", id: 1, card: "function", child_count: 4 }, false],
    [{ type: "group", id: 1, card: "op", child_count: 1 }, false],
    [{ type: "node", id: 1, child_count: 2 }, false],
  ];
  for (const [item, want] of table) assert.equal(opensWithAll(item), want, JSON.stringify(item));
});
