// The setup form's value readers (panels/setup.js): a typed control read back as a literal,
// a dotted path set in the recipe, a shape's text parsed, the suggested profile name.
// Moved out of setup.js.

/** @import { Json, SetupField, Recipe, Problem, ReadBack, ValueControl, FieldInput } from "./setup-types.js" */

// A typed field's control read back: {set, value} (an int, a float, a bool, a string;
// lists and objects as JSON). Anything else is a "value" field, text the server reads.
/**
 * @param {FieldInput} input
 * @param {string} type  the field's type, lower case
 * @param {Problem[]} problems
 * @param {SetupField} f
 * @returns {ReadBack}
 */
// eslint-disable-next-line complexity -- one case per literal type a field holds
export function readLiteral(input, type, problems, f) {
  const raw = input.value.trim();
  if (input._choices) {
    const v = input._choices[/** @type {HTMLSelectElement} */ (input).selectedIndex]; // only a drop-down has choices
    return v === undefined ? { set: false } : { set: true, value: v };
  }
  if (type === "bool" && input.tagName === "SELECT") return { set: true, value: raw === "true" };
  if (raw === "") return { set: false };
  if (type === "bool" && /^(true|false)$/i.test(raw)) return { set: true, value: raw.toLowerCase() === "true" };
  if (type === "str") return { set: true, value: raw };
  // A number the person typed wrong is said here, not saved as text.
  if (type === "int" && !/^-?\d+$/.test(raw)) {
    problems.push({ path: input.dataset.path, message: `${f.name}: expected a whole number (e.g. 4), got ${raw}` });
    return { set: false };
  }
  if (type === "int") return { set: true, value: Number(raw) };
  if (type === "float" && Number.isNaN(Number(raw))) {
    problems.push({ path: input.dataset.path, message: `${f.name}: expected a number (e.g. 0.1), got ${raw}` });
    return { set: false };
  }
  if (type === "float") return { set: true, value: Number(raw) };
  if (/^[[{]/.test(raw)) {
    try {
      return { set: true, value: JSON.parse(raw) };
    } catch {
      return { set: true, value: raw };
    }
  }
  if (/^-?\d+(\.\d*)?([eE][+-]?\d+)?$/.test(raw)) return { set: true, value: Number(raw) };
  if (raw === "true" || raw === "false") return { set: true, value: raw === "true" };
  return { set: true, value: /^(["']).*\1$/s.test(raw) ? raw.slice(1, -1) : raw };
}

/**
 * @param {Json} a
 * @param {Json} b
 */
export function sameValue(a, b) {
  return JSON.stringify(a) === JSON.stringify(b === undefined ? null : b);
}

// recipe["init"]["kwargs"]["config"] = value for "init.kwargs.config" (objects made on the way).
/**
 * @param {Record<string, Json>} root
 * @param {string} path
 * @param {Json} value
 */
export function setPath(root, path, value) {
  const keys = path.split(".");
  let node = root;
  for (const k of keys.slice(0, -1)) {
    if (!node[k] || typeof node[k] !== "object") node[k] = {};
    node = node[k];
  }
  node[keys[keys.length - 1]] = value;
}

// "2, 3", "2 3", "2x3", "[2, 3]" → [2, 3]; anything that is not a whole number stays text.
/**
 * @param {string} text
 * @returns {(number | string)[]}
 */
export function parseShape(text) {
  const t = String(text).trim().replace(/^[[(]|[\])]$/g, "");
  return t === "" ? [] : t.split(/[\s,x×]+/).filter(Boolean).map((d) => (/^\d+$/.test(d) ? Number(d) : d));
}

// The symbol's name made a profile name by the recipe's own rule (capture.recipe.profile_name,
// sent in the schema): each character a name cannot hold becomes "_", cut to the length.
/**
 * @param {Recipe} recipe
 * @param {{profile_name_invalid: string | null, profile_name_max: number | null}} schema  SetupForm.schema
 */
export function suggestName(recipe, schema) {
  const symbol = ((recipe && recipe.model) || "").split(":").pop();
  if (!symbol || !schema.profile_name_invalid) return "profile";
  return symbol.replace(new RegExp(schema.profile_name_invalid, "g"), "_").slice(0, schema.profile_name_max || undefined) || "profile";
}

// The value control `selector` names inside `holder`, one the form drew: always there.
/**
 * @param {ParentNode} holder
 * @param {string} selector
 * @returns {ValueControl}
 */
export function controlIn(holder, selector) {
  return /** @type {ValueControl} */ (holder.querySelector(selector));
}
