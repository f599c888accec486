// A stack card's words (viewer/static/model/card-words.js stackEntry), without a browser.
import { test } from "node:test";
import assert from "node:assert/strict";
import { linesOf, stackEntry } from "../../../viewer/static/model/card-words.js";

const block = (id) => ({ type: "group", id, key: `g${id}`, label: `blocks.${id}`, card: "group", class: "Step",
  node_count: 7, child_count: 4, params: { count: 304, bytes: 1216 } });

test("a run of blocks counts its repetitions", () => {
  const reps = [[block(1)], [block(2)], [block(3)]];
  const e = stackEntry({ key: "sg1", members: [["g1"], ["g2"], ["g3"]], count: 3, period: 1, label: "blocks.1–3" }, reps);
  assert.equal(e.tag, "×3");
  assert.ok(e.lines.includes("3 × 7 ops = 21 ops"), e.lines.join(" | "));
});

test("chunks of alike blocks fold into one stack worded by one block, counting blocks", () => {
  const chunk = (k, n) => ({ type: "chunk", id: `0:${k}`, key: `c0:${k}`, card: "chunk", node_count: 7 * n, child_count: n });
  const stack = { key: "sc0:0", members: [["c0:0"], ["c0:1"]], count: 14285, period: 1, label: "blocks.0–14284",
    block: block(1), chunks: 2,
    cost: { flops: 14285 * 5000, bytes: 14285 * 5888, params: 14285 * 304, per_block: { flops: 5000, bytes: 5888, params: 304 } } };
  const e = stackEntry(stack, [[chunk(0, 400)], [chunk(1, 13885)]]);
  assert.equal(e.title, "blocks.0–14284");
  assert.equal(e.tag, "×14,285");
  assert.ok(e.lines.some((l) => l.startsWith("Step · 304 params")), e.lines.join(" | "));
  assert.ok(e.lines.includes("14,285 × 7 ops = 99,995 ops"), e.lines.join(" | "));
  assert.ok(e.lines.some((l) => l.startsWith("14,285 × 5 kFLOPs = ")), e.lines.join(" | "));
  assert.deepEqual(e.members, ["c0:0", "c0:1"]);
});

test("a chunk card says how many calls it holds beside its own ops", () => {
  const chunk = (groups, children) => ({ type: "chunk", id: "0:0", key: "c0:0", card: "chunk", sublabel: "llama96.py:16",
    node_count: 69920, child_count: children, groups });
  assert.deepEqual(linesOf(chunk(10, 400)), ["llama96.py:16", "10 calls + 390 ops", "69,920 ops"]);
  assert.deepEqual(linesOf(chunk(400, 400)), ["llama96.py:16", "400 calls", "69,920 ops"]);
  assert.deepEqual(linesOf(chunk(0, 400)), ["llama96.py:16", "69,920 ops"]);
});
