// Numbers as the page writes them: counts and bytes on cards, measured statistics in the
// inspector.

// en-US grouping without Intl (toLocaleString dominated display lists of 50k items).
export function grouped(n) {
  n = Number(n);
  if (!Number.isInteger(n)) return n.toLocaleString("en-US");
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

export function formatCount(n) {
  n = Number(n);
  if (n >= 1e9) return (n / 1e9).toFixed(n >= 1e10 ? 1 : 2) + " B";
  if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 1 : 2) + " M";
  if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 1 : 2) + " k";
  return String(n);
}

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

function trimZeros(s) {
  return s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s;
}
