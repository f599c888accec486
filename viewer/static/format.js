// Numbers as the page writes them: counts and bytes on cards, measured statistics in the
// inspector.

// en-US grouping without Intl (toLocaleString dominated display lists of 50k items).
/** @param {number | string} n */
export function grouped(n) {
  n = Number(n);
  if (!Number.isInteger(n)) return n.toLocaleString("en-US");
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** @param {number | string} n */
export function formatCount(n) {
  n = Number(n);
  if (n >= 1e9) return (n / 1e9).toFixed(n >= 1e10 ? 1 : 2) + " B";
  if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 1 : 2) + " M";
  if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 1 : 2) + " k";
  return String(n);
}

/** @param {number | string} b */
export function formatBytes(b) {
  b = Number(b);
  if (b >= 1e9) return (b / 1e9).toFixed(1) + " GB";
  if (b >= 1e6) return (b / 1e6).toFixed(1) + " MB";
  if (b >= 1e3) return (b / 1e3).toFixed(1) + " kB";
  return `${b} B`;
}

// A measured statistic to `digits` significant digits, trailing zeros dropped: -1.5,
// 0.05079, -2.001e-3, 1.235e4; "—" when there is none (every element non-finite). The
// capture spells a non-finite number as a string ("nan", "inf", "-inf").
/** @param {unknown} x @param {number} [digits] */
export function formatStat(x, digits = 4) {
  if (x === null || x === undefined) return "—";
  if (typeof x === "string") return { nan: "NaN", inf: "∞", "-inf": "−∞" }[x] ?? x;
  const n = Number(x);
  if (Number.isNaN(n)) return "NaN";
  if (!Number.isFinite(n)) return n > 0 ? "∞" : "−∞";
  if (n === 0) return "0";
  const a = Math.abs(n);
  if (a >= 10 ** digits || a < 1e-3) {
    const [mantissa, exponent] = n.toExponential(digits - 1).split("e");
    return `${trimZeros(mantissa)}e${Number(exponent)}`;
  }
  return trimZeros(n.toPrecision(digits));
}

/** @param {string} s */
function trimZeros(s) {
  return s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s;
}

/** @type {[number, string][]} */
const FLOP_PREFIXES = [[1e18, "E"], [1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
/** @type {[number, string][]} */
const TIME_UNITS = [[1, "s"], [1e-3, "ms"], [1e-6, "µs"]];

// FLOPs as cards and the cost table write them (a multiply-add counts 2: the server's
// convention, said in the cost panel): 2.42 GFLOPs, 523 MFLOPs, 0 FLOPs.
/** @param {number | string} n */
export function formatFlops(n) {
  n = Number(n);
  for (const [f, p] of FLOP_PREFIXES) {
    if (n >= f) return `${trimZeros((n / f).toPrecision(3))} ${p}FLOPs`;
  }
  return `${n} FLOPs`;
}

// An estimated time (the roofline of a device profile): 3.2 ms, 41 µs.
/** @param {number | string} s */
export function formatTime(s) {
  s = Number(s);
  if (!(s > 0)) return "0";
  for (const [f, u] of TIME_UNITS) if (s >= f) return `${trimZeros((s / f).toPrecision(3))} ${u}`;
  return `${trimZeros((s / 1e-9).toPrecision(3))} ns`;
}

// What a card says a layer costs: `2.42 GFLOPs · 45.1 MB moved`, `~` for an estimate (a
// control-flow body × its trip count), `+3 uncounted` for ops no rule could count (never
// added as zero), `per iteration` inside an unexecuted body.
/** @param {any} cost  a cost entry of api/children (viewer/API.md) */
export function costLine(cost) {
  if (!cost) return "";
  const parts = [];
  const f = cost.flops === null || cost.flops === undefined ? null : Number(cost.flops);
  parts.push(f === null ? "FLOPs uncounted" : `${cost.estimate ? "~" : ""}${formatFlops(f)}`);
  parts.push(`${formatBytes(cost.bytes)} moved`);
  if (cost.uncounted && f !== null) parts.push(`+${grouped(cost.uncounted)} uncounted`);
  if (cost.template) parts.push("per iteration");
  if (cost.scope) parts.push(String(cost.scope)); // a program split across devices: global or per device
  return parts.join(" · ");
}
