// Card metrics shared by the layout worker (which measures text) and the renderer
// (which draws it), and the colour palette read from the stylesheet's custom properties.

const SANS = 'system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif';
const MONO = 'ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, monospace';

export const CARD_STYLE = {
  fontTitle: `600 13px ${SANS}`,
  fontTag: `600 10px ${SANS}`,
  fontMono: `11.5px ${MONO}`,
  fontHeader: `600 12px ${SANS}`,
  fontLabel: `10.5px ${MONO}`,
  fontBoundaryName: `600 11.5px ${MONO}`, // a capture input's name on its pill
  fontQuiet: `10.5px ${MONO}`, // parameter / buffer / variable / constant pills
  padX: 11,
  padTop: 8,
  padBottom: 8,
  titleHeight: 18,
  lineHeight: 15,
  tagGap: 10,
  minCardWidth: 104,
  maxCardWidth: 300,
  minGroupWidth: 180,
  boundaryHeight: 24,
  quietHeight: 19, // the smaller pill of a parameter, buffer, variable or constant
  boundaryGap: 8, // between a pill's name and its shape
  groupPadX: 14,
  groupHeader: 30,
  groupPadBottom: 14,
};

// The zoom at which cards are drawn in full: "Readable detail".
export const READABLE_SCALE = 1;
// Below these scales the renderer simplifies (level of detail).
export const LOD_TEXT = 0.6; // titles and lines
export const LOD_TITLE = 0.42; // titles only (13px titles are ~5.5px on screen here)
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

export function readPalette() {
  const css = getComputedStyle(document.documentElement);
  const v = (name) => css.getPropertyValue(name).trim();
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

// The opaque hatch's 8×8 tile: strokes [x0, y0, x1, y1] over opaqueFill, drawn in
// opaqueHatch, 1.5 wide (the canvas pattern and the SVG export's <pattern>).
export const HATCH_TILE = [[-2, 10, 10, -2], [-2, 2, 2, -2], [6, 10, 10, 6]];

export function kindStyle(palette, kind) {
  return palette.kinds[kind] || palette.kinds.other;
}

// What each group kind honestly is (e.g. a jit scope), what a value role means, and
// which roles are parameters drawn quietly: the server's words (`api/capture`
// `vocabulary`, viewer/projection/names.py), filled in once by setVocabulary() before anything
// is drawn. The app keeps no copy of them.
export const KIND_WORDING = {};
export const ROLE_WORDING = {};
export const QUIET_ROLES = new Set();

export function setVocabulary(v) {
  if (!v) return;
  for (const [kind, w] of Object.entries(v.kinds || {})) KIND_WORDING[kind] = w.sublabel;
  Object.assign(ROLE_WORDING, v.roles || {});
  for (const role of v.weight_roles || []) QUIET_ROLES.add(role);
}

// A value's text (`f32[2,4]`) is the server's `label` (viewer/projection/names.py value_label):
// one dtype table, so cards, pills, edges and search all spell a dtype the same way.
export function formatValue(v) {
  return v && typeof v.label === "string" ? v.label : "?";
}

// What a boundary pill says: its look ("input" | "quiet" | "plain") and its text parts,
// each with a CARD_STYLE font key and a tone ("name" | "shape" | "plain"). The layout
// worker measures exactly these parts; the renderer and the SVG export draw them.
export function boundaryContent(side, v) {
  const shape = formatValue(v);
  const name = v && typeof v.name === "string" && v.name ? v.name : null;
  if (side === "in" && name) {
    const quiet = QUIET_ROLES.has(v.role);
    return {
      look: quiet ? "quiet" : "input",
      role: v.role || null,
      parts: [
        { text: name, font: quiet ? "fontQuiet" : "fontBoundaryName", tone: "name" },
        { text: shape, font: quiet ? "fontQuiet" : "fontMono", tone: "shape" },
      ],
    };
  }
  if (side === "out" && name && v.role === "body_result") {
    // What one iteration of an unexecuted body hands on: `out carry 0 (next iteration)  f32[3]`.
    return {
      look: "plain",
      role: v.role,
      parts: [
        { text: `out  ${name}`, font: "fontMono", tone: "name" },
        { text: shape, font: "fontMono", tone: "shape" },
      ],
    };
  }
  return { look: "plain", role: null, parts: [{ text: `${side}  ${shape}`, font: "fontMono", tone: "plain" }] };
}
