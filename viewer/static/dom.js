// Tiny DOM helpers: elements from data, never from HTML strings (capture text is
// untrusted: op names, file paths and params come from user code).

// An element of the page's markup (index.html) by id. The page's modules (app.js,
// capture-screens.js, canvas-input.js) ask only for ids the page has
// (tests/viewer/test_app_markup.py checks each one), so none is missing.
/**
 * @param {string} id
 * @returns {HTMLElement}
 */
export const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

/**
 * @param {string} tag
 * @param {Record<string, any> | null} [attrs]  `class`, `on…` handlers, attributes
 * @param {...any} children  nodes and texts (nested arrays flattened; null, undefined and false left out)
 * @returns {any} the new HTMLElement (callers keep fields of their own on some, `_inp`, `_choices`)
 */
// eslint-disable-next-line complexity -- each kind of attribute (class, style, on…, boolean, data) set its own way
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

/** @param {Node} node */
export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

// Pretty JSON as coloured spans (keys, strings, numbers), built without innerHTML.
/** @param {unknown} data */
export function jsonView(data) {
  const pre = el("pre", { class: "json" });
  const text = compactJson(data, "") ?? "null";
  const re = /("(?:\\.|[^"\\])*")(\s*:)?|\b(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)\b/g;
  let last = 0;
  let m;
  while ((m = re.exec(text))) {
    if (m.index > last) pre.append(text.slice(last, m.index));
    if (m[1] && m[2]) pre.append(el("span", { class: "k" }, m[1]), m[2]);
    else if (m[1]) pre.append(el("span", { class: "s" }, m[1]));
    else pre.append(el("span", { class: "n" }, m[3]));
    last = re.lastIndex;
  }
  pre.append(text.slice(last));
  return pre;
}

// JSON.stringify(…, 2), except that short arrays and objects of scalars stay on one line
// (dimension numbers, shapes, strides read better as [[1], [0]] than as ten lines).
/**
 * @param {any} data
 * @param {string} indent
 * @returns {string | undefined}
 */
export function compactJson(data, indent) {
  const one = JSON.stringify(data);
  if (one === undefined) return undefined;
  if (one.length <= 56 || data === null || typeof data !== "object") return oneLine(data);
  const inner = indent + "  ";
  if (Array.isArray(data)) {
    return "[\n" + data.map((v) => inner + (compactJson(v, inner) ?? "null")).join(",\n") + "\n" + indent + "]";
  }
  const entries = Object.entries(data).filter(([, v]) => v !== undefined);
  return "{\n" + entries.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${compactJson(v, inner)}`).join(",\n") + "\n" + indent + "}";
}

/**
 * @param {any} data
 * @returns {string | undefined}
 */
function oneLine(data) {
  if (Array.isArray(data)) return "[" + data.map((v) => oneLine(v) ?? "null").join(", ") + "]";
  if (data && typeof data === "object") {
    const entries = Object.entries(data).filter(([, v]) => v !== undefined);
    return "{" + entries.map(([k, v]) => `${JSON.stringify(k)}: ${oneLine(v)}`).join(", ") + "}";
  }
  return JSON.stringify(data);
}
