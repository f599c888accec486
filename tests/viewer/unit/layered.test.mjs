// The fast layered layout (viewer/static/layout/layered.js), without a browser: what a
// container too big for ELK is laid out with first. Its geometry must read as ELK's does:
// data flows down, no two cards overlap, every edge is drawn orthogonally from its
// source's bottom to its target's top.
import { test } from "node:test";
import assert from "node:assert/strict";
import { FAST_ITEMS, FAST_PAIRS, inOrder, layeredLayout, tooBigForElk } from "../../../viewer/static/layout/layered.js";

const card = (title) => ({ kind: "node", title, lines: [] });
const size = (w = 120, h = 40) => ({ w, h });

/** A job of `n` cards and the given edges (pairs of positions). */
function job(n, pairs, extra = {}) {
  return { sig: "t", items: Array.from({ length: n }, (_, i) => card(`op${i}`)), edges: pairs.map(([s, t]) => ({ s, t })), ...extra };
}

const meets = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

function checkGeometry(j, sizes, layout) {
  const boxes = layout.boxes;
  assert.equal(boxes.length, j.items.length);
  boxes.forEach((b, i) => {
    assert.equal(b.w, sizes[i].w);
    assert.equal(b.h, sizes[i].h);
    assert.ok(b.x >= 0 && b.y >= 0 && b.x + b.w <= layout.w && b.y + b.h <= layout.h, `card ${i} inside the container`);
  });
  for (let i = 0; i < boxes.length; i++) for (let k = i + 1; k < boxes.length; k++) {
    assert.ok(!meets(boxes[i], boxes[k]), `cards ${i} and ${k} overlap`);
  }
  for (const le of layout.edges) {
    const e = j.edges[le.e];
    const pts = le.points;
    assert.ok(pts.length >= 2);
    for (let i = 0; i + 1 < pts.length; i++) {
      const [x1, y1] = pts[i];
      const [x2, y2] = pts[i + 1];
      assert.ok(Math.abs(x1 - x2) < 0.01 || Math.abs(y1 - y2) < 0.01, `edge ${le.e} is orthogonal`);
    }
    const s = boxes[e.s];
    const t = boxes[e.t];
    const [sx, sy] = pts[0];
    const [tx, ty] = pts[pts.length - 1];
    if (s.y < t.y) {
      assert.ok(Math.abs(sy - (s.y + s.h)) < 0.01 && sx >= s.x && sx <= s.x + s.w, `edge ${le.e} leaves its source's bottom`);
      assert.ok(Math.abs(ty - t.y) < 0.01 && tx >= t.x && tx <= t.x + t.w, `edge ${le.e} enters its target's top`);
    }
  }
}

test("a chain runs straight down, one layer per step", () => {
  const j = job(5, [[0, 1], [1, 2], [2, 3], [3, 4]]);
  const sizes = j.items.map(() => size());
  const l = layeredLayout(j, sizes);
  checkGeometry(j, sizes, l);
  for (let i = 0; i + 1 < 5; i++) {
    assert.ok(l.boxes[i + 1].y > l.boxes[i].y + l.boxes[i].h, "each step below the one before");
    assert.equal(l.boxes[i + 1].x, l.boxes[i].x, "the chain stands in one column");
  }
  for (const le of l.edges) assert.equal(le.points.length, 2, "a straight edge has two points");
});

test("a residual edge skips layers beside the path and the cards it skips stay clear of it", () => {
  // 0 → 1 → 2 → 3 and 0 → 3 (x + f(g(x)))
  const j = job(4, [[0, 1], [1, 2], [2, 3], [0, 3]]);
  const sizes = j.items.map(() => size());
  const l = layeredLayout(j, sizes);
  checkGeometry(j, sizes, l);
  const skip = l.edges.find((le) => le.e === 3);
  // its vertical runs pass beside cards 1 and 2, never through them
  for (let i = 0; i + 1 < skip.points.length; i++) {
    const [x1, y1] = skip.points[i];
    const [x2, y2] = skip.points[i + 1];
    if (x1 !== x2) continue;
    for (const k of [1, 2]) {
      const b = l.boxes[k];
      const through = x1 > b.x && x1 < b.x + b.w && Math.min(y1, y2) < b.y + b.h && Math.max(y1, y2) > b.y;
      assert.ok(!through, `the residual runs through card ${k}`);
    }
  }
});

test("a source with no inputs sits just above its first use, as ELK's network simplex puts it", () => {
  // 0 → 1 → 2 → 3 → 4, and a constant 5 used by 4 only
  const j = job(6, [[0, 1], [1, 2], [2, 3], [3, 4], [5, 4]]);
  const sizes = j.items.map(() => size());
  const l = layeredLayout(j, sizes);
  checkGeometry(j, sizes, l);
  assert.equal(l.boxes[5].y, l.boxes[3].y, "the constant stands in the layer just above its use");
});

test("edges between the same two cards share one route; loops and missing ends are left out", () => {
  const j = job(3, [[0, 1], [0, 1], [1, 2], [2, 2], [1, 9]]);
  const sizes = j.items.map(() => size());
  const l = layeredLayout(j, sizes);
  const byEdge = new Map(l.edges.map((le) => [le.e, le]));
  assert.deepEqual(byEdge.get(0).points, byEdge.get(1).points);
  assert.notEqual(byEdge.get(0).points, byEdge.get(1).points, "copies, not one array");
  assert.ok(!byEdge.has(3) && !byEdge.has(4));
});

test("a back edge is drawn turned round, from its source to its target", () => {
  const j = job(3, [[0, 1], [1, 2], [2, 0]]);
  const sizes = j.items.map(() => size());
  const l = layeredLayout(j, sizes);
  checkGeometry(j, sizes, l);
  const back = l.edges.find((le) => le.e === 2);
  const [sx, sy] = back.points[0];
  const [tx, ty] = back.points[back.points.length - 1];
  const s = l.boxes[2];
  const t = l.boxes[0];
  assert.ok(Math.abs(sy - s.y) < 0.01 && sx >= s.x && sx <= s.x + s.w, "starts at its source");
  assert.ok(Math.abs(ty - (t.y + t.h)) < 0.01 && tx >= t.x && tx <= t.x + t.w, "ends at its target");
});

test("a generate loop's container: hundreds of cards and fan-outs, laid out fast without overlaps", () => {
  // 14 steps, each 40 cards in a chain, each step reading a mask made at the top and the
  // step before's 8 outputs (a KV cache); 600 cards, about 1,300 edges
  const pairs = [];
  const n = 1 + 14 * 40 + 39;
  for (let s = 0; s < 14; s++) {
    const base = 1 + s * 40;
    for (let k = 0; k + 1 < 40; k++) pairs.push([base + k, base + k + 1]);
    pairs.push([0, base]);
    for (let k = 0; k < 40; k += 5) pairs.push([0, base + k]);
    if (s) for (let k = 0; k < 8; k++) pairs.push([base - 40 + k * 4, base + k * 5]);
  }
  for (let k = 0; k < 39; k++) pairs.push([n - 40 + k, n - 39 + k]);
  const j = job(n, pairs);
  const sizes = j.items.map((_, i) => size(80 + (i % 7) * 20, 36 + (i % 3) * 12));
  assert.ok(tooBigForElk(j));
  const t0 = performance.now();
  const l = layeredLayout(j, sizes);
  const ms = performance.now() - t0;
  checkGeometry(j, sizes, l);
  assert.equal(l.edges.length, pairs.length);
  assert.ok(ms < 5000, `laid out in ${ms} ms`); // a generous bound: ELK took 11 s on such a container
});

test("what goes to the fast layout: many cards or many wired pairs, never a row of bodies", () => {
  assert.ok(!tooBigForElk(job(FAST_ITEMS - 1, [])));
  assert.ok(tooBigForElk(job(FAST_ITEMS, [])));
  assert.ok(!tooBigForElk(job(FAST_ITEMS, [], { row: true })));
  const pairs = [];
  for (let i = 0; i < 40; i++) for (let k = 40; k < 40 + Math.ceil(FAST_PAIRS / 40); k++) pairs.push([i, k]);
  assert.ok(tooBigForElk(job(100, pairs)));
  // the same pair many times is one pair
  assert.ok(!tooBigForElk(job(10, Array.from({ length: FAST_PAIRS * 2 }, () => [0, 1]))));
});

test("inOrder: as near as the order and the spans allow (least squares)", () => {
  assert.deepEqual(inOrder([0, 100, 200], [50, 50, 50]), [0, 100, 200]);
  // two wanting one place share the difference
  assert.deepEqual(inOrder([100, 100], [50, 50]), [75, 125]);
  // order is kept when the wishes cross: the nearest, 50 apart (x0 ~ 300, x0 + 50 ~ 0)
  assert.deepEqual(inOrder([300, 0], [50, 50]), [125, 175]);
});

test("cards wired to nothing stand in rows below the rest, not in one long row", () => {
  const n = 102; // a chain of two, and 100 loose cards
  const j = job(n, [[0, 1]]);
  const sizes = j.items.map(() => size());
  const l = layeredLayout(j, sizes);
  checkGeometry(j, sizes, l);
  const rows = new Set(l.boxes.slice(2).map((b) => b.y));
  assert.ok(rows.size >= 5, `${rows.size} rows`);
  for (const b of l.boxes.slice(2)) assert.ok(b.y > l.boxes[1].y, "below the wired cards");
  assert.ok(l.w < l.h * 4, `about square: ${l.w} x ${l.h}`);
  // a few loose cards stay in the top row beside the rest
  const few = layeredLayout(job(5, [[0, 1]]), Array.from({ length: 5 }, () => size()));
  assert.equal(few.boxes[4].y, few.boxes[0].y);
});

test("a long chain with residual edges and constants beside it stands straight (no drift)", () => {
  // 400 ops in a chain, a residual edge over every three, a constant into every fourth:
  // a flat jit's first chunk. Its cards must stand in one column, as ELK draws it.
  const chain = 400;
  const pairs = [];
  for (let i = 0; i + 1 < chain; i++) pairs.push([i, i + 1]);
  for (let i = 0; i + 3 < chain; i += 3) pairs.push([i, i + 3]);
  for (let k = 0; k < 100; k++) pairs.push([chain + k, k * 4]);
  const j = job(chain + 100, pairs);
  const sizes = j.items.map((_, i) => size(80 + (i % 3) * 30, 40));
  const l = layeredLayout(j, sizes);
  checkGeometry(j, sizes, l);
  const centres = new Set(l.boxes.slice(0, chain).map((b) => b.x + b.w / 2));
  assert.equal(centres.size, 1, `the chain's centres: ${[...centres].slice(0, 8).join(", ")}…`);
});
