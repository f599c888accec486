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
// Wheel zoom stops here; only Fit may go further out.
export const MIN_ZOOM = 0.2;
export const MAX_ZOOM = 4;

const KIND_VARS = ["jit", "scope", "module", "remat", "custom_jvp", "custom_vjp", "chunk", "cond", "other"];

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
    select: v("--select"),
    highlight: v("--highlight"),
    kinds,
  };
}

export function kindStyle(palette, kind) {
  return palette.kinds[kind] || palette.kinds.other;
}

// What each group kind honestly is; the inspector shows the server's own wording too.
export const KIND_WORDING = {
  jit: "jit · tracing scope",
  scope: "tracing scope",
  module: "module instance",
  remat: "remat · checkpointed scope",
  custom_jvp: "custom_jvp · custom derivative scope",
  custom_vjp: "custom_vjp · custom derivative scope",
  chunk: "chunk · program order",
  function: "function call",
  loss: "loss · training step",
  backward: "backward · training step",
  optimizer: "optimizer · training step",
};

const DTYPE_SHORT = {
  float32: "f32", float16: "f16", bfloat16: "bf16", float64: "f64", float8_e4m3fn: "f8e4m3", float8_e5m2: "f8e5m2",
  int8: "i8", int16: "i16", int32: "i32", int64: "i64", uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
  bool: "bool", complex64: "c64", complex128: "c128",
};

export function shortDtype(dtype) {
  return DTYPE_SHORT[dtype] || String(dtype ?? "?");
}

export function formatValue(v) {
  if (!v) return "?";
  const shape = Array.isArray(v.shape) ? v.shape.join(",") : "";
  return `${shortDtype(v.dtype)}[${shape}]`;
}
