// ELK's options for a container, as the layout worker gives them, with their column and
// screen variants below (layout.worker.js derives its row variant; chain.js lays a chain
// out with the same spacing and padding, and tests/viewer/browser/test_chain_layout.py
// compares the two with each set CHAIN_OPTIONS lists).

// Chosen by measurement on real models (benchmarks/bench_viewer_readability.py) and on
// the synthetic layered graphs (benchmarks/bench_viewer_browser.py): network-simplex
// layering puts a parameter-free source (an input, a constant) next to its first use
// instead of in the top layer; nodes keep program order (model order), so consecutive
// blocks stack in one column; Brandes-Köpf placement with a balanced alignment keeps the
// main path straight, residual edges run beside it. One sweep of crossing minimisation
// and no greedy switch keep a 400-item container fast.
// Between two layers and around the cards (chain.js lays a chain out with the same figures).
export const LAYER_SPACING = 40;
export const PADDING = 10;
export const LAYOUT_OPTIONS = {
  "elk.algorithm": "layered",
  "elk.direction": "DOWN",
  "elk.edgeRouting": "ORTHOGONAL",
  "elk.layered.spacing.nodeNodeBetweenLayers": String(LAYER_SPACING),
  "elk.layered.spacing.edgeNodeBetweenLayers": "16",
  "elk.spacing.nodeNode": "28",
  "elk.spacing.edgeNode": "14",
  "elk.spacing.edgeEdge": "10",
  "elk.layered.nodePlacement.strategy": "BRANDES_KOEPF",
  "elk.layered.nodePlacement.bk.fixedAlignment": "BALANCED",
  "elk.layered.layering.strategy": "NETWORK_SIMPLEX",
  "elk.layered.considerModelOrder.strategy": "NODES_AND_EDGES",
  "elk.layered.thoroughness": "1",
  "elk.layered.crossingMinimization.greedySwitch.type": "OFF",
  "elk.layered.compaction.postCompaction.strategy": "NONE",
  "elk.padding": `[top=${PADDING},left=${PADDING},bottom=${PADDING},right=${PADDING}]`,
};

// Blocks of a stack in one column (the worker's job.columns): network-simplex placement.
export const COLUMN_OPTIONS = { ...LAYOUT_OPTIONS, "elk.layered.nodePlacement.strategy": "NETWORK_SIMPLEX" };
// Laid out for the screen (Expand all, Depth…: job.wrap), the whole model is to be seen at
// once: less room between layers and between cards, which at Fit is what the cards lose.
// Between layers, room still for an edge's shape label beside it (labelSpot: a vertical
// run of 22 px at least); edges keep their lanes.
export const DENSE_LAYER_SPACING = 22;
export const DENSE = {
  "elk.layered.spacing.nodeNodeBetweenLayers": String(DENSE_LAYER_SPACING),
  "elk.layered.spacing.edgeNodeBetweenLayers": "8",
  "elk.spacing.nodeNode": "12",
  "elk.spacing.edgeNode": "8",
  "elk.spacing.edgeEdge": "4",
};
export const DENSE_OPTIONS = { ...LAYOUT_OPTIONS, ...DENSE };
export const DENSE_COLUMN_OPTIONS = { ...COLUMN_OPTIONS, ...DENSE };

// The options chain.js lays a chain out with exactly as ELK does
// (tests/viewer/browser/test_chain_layout.py compares them): the spacing between layers,
// and whether ELK's network-simplex placement puts the items on whole pixels. The pieces of
// a wrapped chain (the worker's relaidColumns: fifteen on a 400-layer chunk after Expand
// all) were ELK's: a third of a second per layout of the chunk.
/** @type {Map<object, [number, boolean]>} */
export const CHAIN_OPTIONS = new Map([
  [LAYOUT_OPTIONS, [LAYER_SPACING, false]],
  [DENSE_OPTIONS, [DENSE_LAYER_SPACING, false]],
  [COLUMN_OPTIONS, [LAYER_SPACING, true]],
  [DENSE_COLUMN_OPTIONS, [DENSE_LAYER_SPACING, true]],
]);
