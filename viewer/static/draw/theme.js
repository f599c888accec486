// The look shared by the renderer and the SVG export: zoom levels of detail, the colour
// palette read from the stylesheet's custom properties, and the server's words for group
// kinds and value roles. Card fonts and metrics live with the cards (card.js).

// The zoom at which cards are drawn in full: "Readable detail".
export const READABLE_SCALE = 1;
// Below these scales the renderer simplifies (level of detail).
export const LOD_TEXT = 0.6; // titles and lines
// Titles only between LOD_TITLE and LOD_TEXT; below LOD_TITLE every item says what it is
// with its far name (10.5 px on screen, drawlist.js farLabel). Titles alone below 0.6 are
// under 8 px on screen (13 px titles): the far names read better, so that band is empty.
export const LOD_TITLE = 0.6;
// Edges keep their arrows down to here.
export const LOD_ARROWS = 0.42;
export const LOD_EDGE_LABELS = 0.7;
// The first view opens at a zoom where titles and lines are legible: the whole graph when
// it fits at LEGIBLE_SCALE or more, else FIRST_SCALE on the graph's inputs.
export const LEGIBLE_SCALE = 0.6;
export const FIRST_SCALE = 0.8;
// The first view closes groups it opened while Fit would need a zoom below this.
export const FIRST_FIT = 0.3;
// Wheel zoom stops here; only Fit may go further out.
export const MIN_ZOOM = 0.2;
export const MAX_ZOOM = 4;

const KIND_VARS = ["jit", "scope", "module", "remat", "custom_jvp", "custom_vjp", "chunk", "cond", "body", "other"];

/** @typedef {ReturnType<typeof readPalette>} Palette  the page's colours, read from its CSS */

export function readPalette() {
  const css = getComputedStyle(document.documentElement);
  /** @param {string} name */
  const v = (name) => css.getPropertyValue(name).trim();
  /** @type {Record<string, {fill: string, stroke: string, text: string}>} */
  const kinds = {};
  for (const k of KIND_VARS) {
    const name = k.replace("_", "-");
    kinds[k] = { fill: v(`--kind-${name}-fill`), stroke: v(`--kind-${name}-stroke`), text: v(`--kind-${name}-text`) };
  }
  return {
    background: v("--canvas-bg"),
    grid: v("--canvas-grid"),
    cardFill: v("--card-fill"),
    cardStroke: v("--card-stroke"),
    cardText: v("--card-text"),
    cardMuted: v("--card-muted"),
    cardShadow: v("--card-shadow"),
    opaqueFill: v("--opaque-fill"),
    opaqueStroke: v("--opaque-stroke"),
    opaqueHatch: v("--opaque-hatch"),
    collectiveFill: v("--collective-fill"),
    collectiveStroke: v("--collective-stroke"),
    compilerStroke: v("--compiler-stroke"),
    edge: v("--edge"),
    edgeLabel: v("--edge-label"),
    edgeLabelBg: v("--edge-label-bg"),
    boundaryFill: v("--boundary-fill"),
    boundaryStroke: v("--boundary-stroke"),
    boundaryText: v("--boundary-text"),
    boundaryMuted: v("--boundary-muted"),
    inputFill: v("--input-fill"),
    inputStroke: v("--input-stroke"),
    inputText: v("--input-text"),
    quietFill: v("--quiet-fill"),
    quietStroke: v("--quiet-stroke"),
    quietText: v("--quiet-text"),
    quietMuted: v("--quiet-muted"),
    select: v("--select"),
    highlight: v("--highlight"),
    kinds,
  };
}

// The fill of an opaque node: the hatch pattern (the canvas's pattern, the SVG's <pattern>).
export const HATCH = "url(#hatch)";

// The opaque hatch's 8×8 tile: strokes [x0, y0, x1, y1] over opaqueFill, drawn in
// opaqueHatch, 1.5 wide (the canvas pattern and the SVG export's <pattern>).
export const HATCH_TILE = [[-2, 10, 10, -2], [-2, 2, 2, -2], [6, 10, 10, 6]];

/**
 * @param {{kinds: Record<string, {fill: string, stroke: string, text: string}>}} palette
 * @param {string} kind
 */
export function kindStyle(palette, kind) {
  return palette.kinds[kind] || palette.kinds.other;
}

// What each group kind honestly is (e.g. a jit scope), what a value role means, and
// which roles are parameters drawn quietly: the server's words (`api/capture`
// `vocabulary`, capture/analysis/names.py), filled in once by setVocabulary() before anything
// is drawn. The app keeps no copy of them.
/** @type {Record<string, string>} */
export const KIND_WORDING = {};
/** @type {Record<string, string>} */
export const ROLE_WORDING = {};
/** @type {Set<string>} */
export const QUIET_ROLES = new Set();

/** @param {any} v  `api/capture`'s `vocabulary` */
export function setVocabulary(v) {
  if (!v) return;
  for (const [kind, w] of Object.entries(v.kinds || {})) KIND_WORDING[kind] = w.sublabel;
  Object.assign(ROLE_WORDING, v.roles || {});
  for (const role of v.weight_roles || []) QUIET_ROLES.add(role);
}

// A value's text (`f32[2,4]`) is the server's `label` (capture/analysis/names.py value_label):
// one dtype table, so cards, pills, edges and search all spell a dtype the same way.
// Shapes as the graph shows them: global (a split value says how: `f32[8@data,16]`), or
// what one device holds (`f32[2,16]`) once the mesh legend's "Per device shapes" is on. A value that
// is not split reads the same either way (the server sends `device_label` only for split ones).
let perDevice = false;

/** @param {boolean} on */
export function setPerDeviceShapes(on) {
  perDevice = !!on;
}

export function perDeviceShapes() {
  return perDevice;
}

/** @param {any} v  a value of the API (its `label`) */
export function formatValue(v) {
  if (v && perDevice && typeof v.device_label === "string") return v.device_label;
  return v && typeof v.label === "string" ? v.label : "?";
}

// An edge's label in the shapes shown (see formatValue).
/** @param {any} e  an edge of the API (its `label`, and `device_label` when the value is split) */
export function edgeText(e) {
  return (perDevice && typeof e.device_label === "string" && e.device_label) || e.label || "";
}
