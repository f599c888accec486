// Numbers as the page writes them: counts and bytes on cards, measured statistics in the
// inspector.

// en-US grouping without Intl (toLocaleString dominated display lists of 50k items).
/** @param {number | string} n */
export function grouped(n) {
  n = Number(n);
  if (!Number.isInteger(n)) return n.toLocaleString("en-US");
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

// Bytes, FLOPs, counts and times: the rules of capture/units.py, mirrored one for one
// (tests/foundation/test_units.py runs both over one table of values and compares): three
// significant digits, never fewer than the integer part, rounded half up, trailing zeros
// dropped, the unit chosen after rounding (1,048,575 bytes is "1 MiB", never "1e+03 KiB");
// binary units for bytes; "unknown" for a figure that is not known (null); a whole number
// beyond the largest unit in scientific notation, exactly (BigInt), never as a float.

const UNKNOWN = "unknown";
const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
const PREFIXES = ["", "k", "M", "G", "T", "P", "E"];
const FLOP_UNITS = PREFIXES.map((p) => `${p}FLOPs`);
const COUNT_SUFFIXES = ["", " k", " M", " B", " T"];
/** @type {[number, string][]} */
const TIME_UNITS = [[1, "s"], [1e-3, "ms"], [1e-6, "µs"], [1e-9, "ns"]];

/** @param {number} x @param {number} decimals */
function roundHalfUp(x, decimals) {
  const scale = 10 ** decimals;
  return Math.floor(x * scale + 0.5) / scale;
}

/** @param {number} x @returns {[string, number]} */
function digits(x) {
  let decimals = x < 10 ? 2 : x < 100 ? 1 : 0;
  let r = roundHalfUp(x, decimals);
  if ((r >= 10 && decimals === 2) || (r >= 100 && decimals === 1)) {
    decimals -= 1;
    r = roundHalfUp(x, decimals);
  }
  return [trimZeros(r.toFixed(decimals)), r];
}

/** @param {bigint} n */
function scientific(n) {
  let exp = 0n;
  while (10n ** (exp + 1n) <= n) exp += 1n;
  let lead = (n * 100n + 10n ** exp / 2n) / 10n ** exp;
  if (lead >= 1000n) {
    lead /= 10n;
    exp += 1n;
  }
  return `${lead / 100n}.${String(lead % 100n).padStart(2, "0")}e${exp}`;
}

/** @param {unknown} value @param {number} base @param {string[]} units @param {string} joiner @returns {string} */
// eslint-disable-next-line complexity -- the unit chosen by magnitude and sign, in one place for every formatter
function scaled(value, base, units, joiner) {
  if (value === null || value === undefined || value === "" || typeof value === "boolean") return UNKNOWN;
  const n = Number(value);
  if (Number.isNaN(n)) return UNKNOWN;
  if (!Number.isFinite(n)) return `${n < 0 ? "-" : ""}∞${joiner}${units[0]}`.trimEnd();
  if (n < 0) return "-" + scaled(-n, base, units, joiner);
  const top = units.length - 1;
  if (n >= 1000 * base ** top) {
    const exact = typeof value === "bigint" ? value : BigInt(Math.floor(n));
    return `${scientific(exact / BigInt(base) ** BigInt(top))}${joiner}${units[top]}`;
  }
  let k = 0;
  while (k < top && n >= base ** (k + 1)) k += 1;
  if (k === 0 && Number.isInteger(n)) return `${n}${joiner}${units[0]}`;
  let [text, r] = digits(n / base ** k);
  if (r >= base && k < top) {
    k += 1;
    [text, r] = digits(n / base ** k);
  }
  return `${text}${joiner}${units[k]}`;
}

// 999, 7.09 M, 1.2 B.
/** @param {unknown} n */
export function formatCount(n) {
  return scaled(n, 1000, COUNT_SUFFIXES, "");
}

// 512 B, 1.5 KiB, 28.4 MiB, 1 GiB.
/** @param {unknown} b */
export function formatBytes(b) {
  return scaled(b, 1024, BYTE_UNITS, " ");
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

// FLOPs as cards and the cost table write them (a multiply-add counts 2: the server's
// convention, said in the cost panel): 2.42 GFLOPs, 523 kFLOPs, 0 FLOPs.
/** @param {unknown} n */
export function formatFlops(n) {
  return scaled(n, 1000, FLOP_UNITS, " ");
}

// An estimated time (the roofline of a device profile): 3.2 ms, 41 µs; "0" for none.
/** @param {unknown} value */
export function formatTime(value) {
  if (value === null || value === undefined || typeof value === "boolean") return UNKNOWN;
  const s = Number(value);
  if (Number.isNaN(s)) return UNKNOWN;
  if (!(s > 0)) return "0";
  if (!Number.isFinite(s)) return "∞";
  for (let i = 0; i < TIME_UNITS.length; i++) {
    const [factor, unit] = TIME_UNITS[i];
    if (s >= factor || i === TIME_UNITS.length - 1) {
      const [text, r] = digits(s / factor);
      if (r >= 1000 && i > 0) return `${digits(s / TIME_UNITS[i - 1][0])[0]} ${TIME_UNITS[i - 1][1]}`;
      return `${text} ${unit}`;
    }
  }
  return UNKNOWN;
}

// What a card says a layer costs: `2.42 GFLOPs · 45.1 MB moved`, `~` for an estimate (a
// control-flow body × its trip count), `+3 uncounted` for ops no rule could count (never
// added as zero), `per iteration` inside an unexecuted body.
/** @param {any} cost  a cost entry of api/children (viewer/API.md) */
export function costLine(cost) {
  if (!cost) return "";
  const parts = [];
  const f = cost.flops === null || cost.flops === undefined ? null : Number(cost.flops);
  // a program split across devices: the FLOPs' scope beside them (global, per device, per
  // rank); a split Torch program's DTensor op also what one rank computes
  const scope = cost.scope ? ` ${cost.scope}` : "";
  const rank = cost.per_rank === undefined ? "" : cost.per_rank === null ? " (per rank uncounted)" : ` (${formatFlops(cost.per_rank)} per rank)`;
  parts.push(f === null ? "FLOPs uncounted" : `${cost.estimate ? "~" : ""}${formatFlops(f)}${scope}${rank}`);
  parts.push(`${formatBytes(cost.bytes)} moved`);
  if (cost.uncounted && f !== null) parts.push(`+${grouped(cost.uncounted)} uncounted`);
  if (cost.template) parts.push("per iteration");
  return parts.join(" · ");
}
