// The setup form's value readers (panels/setup.js): a typed control read back as a literal,
// a dotted path set in the recipe, a shape's text parsed, the suggested profile name.
// Moved out of setup.js, with collectRecipe: the form read back into the recipe to save
// (SetupForm.collect, `this` read as `form`).

/** @typedef {import("./setup.js").SetupForm} SetupForm */
/** @import { Json, Generator, SetupInput, SetupField, RecipeInit, Recipe, SetupData, Problem, ReadBack, InputCard, ValueControl, FieldInput } from "./setup-types.js" */

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

// The recipe to save: the server's recipe with the form's inputs and fields in it.
/**
 * @param {SetupForm} form
 * @returns {{recipe: Recipe, problems: Problem[]}}
 */
// eslint-disable-next-line complexity -- reads the whole form back into a recipe, section by section
export function collectRecipe(form) {
  const data = /** @type {SetupData} */ (form.data); // save() runs on a form load() drew
  /** @type {Recipe} */
  const recipe = structuredClone(data.recipe || {});
  /** @type {Json[]} */
  const args = [];
  /** @type {Record<string, Json>} */
  const kwargs = {};
  /** @type {Problem[]} */
  const problems = [];
  const saved = form.savedFiles(problems);
  const fromFixture = !!(saved && saved.fixture);
  const inputsFactory = form.modes.inputs && form.modes.inputs() === "factory";
  const initFactory = form.modes.init && form.modes.init() === "factory";
  // eslint-disable-next-line complexity -- one input card read back: value or array, with its checks
  form.root.querySelectorAll(".input-card").forEach((/** @type {InputCard} */ card) => {
    if (fromFixture || inputsFactory) return; // the fixture or the factory gives the inputs
    /** @type {SetupInput} */
    const inp = card._inp || {};
    if (card.dataset.kind === "value") {
      const textInput = controlIn(card, "[name=value-text]");
      const raw = textInput.value.trim();
      if (!raw) problems.push({ path: textInput.dataset.path, message: `enter the value of ${inp.name || "this input"} (none, true, 3, 'text', Config(...))` });
      const desc = { kind: "text", text: raw };
      if (inp.kwarg || (inp.path && inp.path.includes("kwargs"))) kwargs[String(inp.name)] = desc;
      else args.push(desc);
      return;
    }
    const shapeInput = controlIn(card, "[name=shape]");
    const shape = parseShape(shapeInput.value);
    if (shape.some((x) => typeof x !== "number")) problems.push({ path: shapeInput.dataset.path, message: "every dimension must be a whole number" });
    else if (!shape.length && card.dataset.needed) problems.push({ path: shapeInput.dataset.path, message: `enter the shape of ${inp.name || "this input"} (whole numbers, e.g. 2, 3)` });
    const genKind = controlIn(card, "[name=generator]").value;
    const { fill, bounded } = form.schema;
    const genValue = genKind === fill ? controlIn(card, "[name=generator-value]").value.trim() : "";
    /** @type {Generator} */
    const generator = { ...(inp.generator && inp.generator.kind === genKind ? inp.generator : {}), kind: genKind };
    if (genValue !== "") generator.value = Number.isNaN(Number(genValue)) ? genValue : Number(genValue);
    else if (genKind === fill) delete generator.value;
    if (genKind === bounded) {
      const highInput = controlIn(card, "[name=generator-high]");
      const high = Number(highInput.value.trim());
      if (!Number.isInteger(high) || high <= 0) problems.push({ path: highInput.dataset.path, message: `${bounded} draws integers below a whole number high (e.g. 100)` });
      else generator.high = high;
      if (generator.low === undefined) generator.low = 0;
    }
    const desc = {
      ...(inp.description || {}),
      kind: inp.kind || "tensor",
      shape,
      dtype: controlIn(card, "[name=dtype]").value,
      requires_grad: false,
      generator,
    };
    if (inp.kwarg || (inp.path && inp.path.includes("kwargs"))) kwargs[String(inp.name)] = desc;
    else args.push(desc);
  });
  const savedInputs = recipe.inputs; // the saved inputs, until replaced below
  const savedFixture = savedInputs && savedInputs.fixture;
  if (inputsFactory) {
    const ref = controlIn(form.root, "[name=inputs-factory]");
    if (!ref.value.trim()) problems.push({ path: "inputs.factory", message: "name the function that returns the inputs (module:function)" });
    recipe.inputs = { factory: ref.value.trim() };
  } else if (saved && fromFixture) {
    // Literal kwargs saved beside a fixture stay; the cards' tensors do not join it.
    const prior = savedInputs && savedFixture && savedInputs.kwargs ? savedInputs.kwargs : null;
    recipe.inputs = { fixture: saved.fixture };
    if (Object.keys(saved.fixture_keys).length) recipe.inputs.fixture_keys = saved.fixture_keys;
    if (prior && Object.keys(prior).length) recipe.inputs.kwargs = prior;
  } else if (data.inputs && data.inputs.length) {
    const base = savedInputs && savedFixture ? { kwargs: savedInputs.kwargs || {} } : savedInputs || {};
    recipe.inputs = { ...base, args, kwargs: { ...(base.kwargs || {}), ...kwargs } };
    delete recipe.inputs.factory;
  } else if (saved && savedInputs && savedFixture) {
    recipe.inputs = { args: [], kwargs: savedInputs.kwargs || {} };
  } else if (savedInputs && savedInputs.factory) {
    recipe.inputs = { args: [], kwargs: {} }; // the factory was turned off
  }
  /** @type {RecipeInit} */
  const init = { ...(recipe.init || { args: [], kwargs: {} }) };
  if (initFactory) {
    const ref = controlIn(form.root, "[name=init-factory]");
    if (!ref.value.trim()) problems.push({ path: "init.factory", message: "name the function that builds the model (module:function)" });
    for (const k of /** @type {const} */ (["args", "kwargs"])) delete init[k];
    init.factory = ref.value.trim();
  } else if (init.factory) {
    delete init.factory;
    init.args = [];
    init.kwargs = {};
  }
  if (saved) {
    delete init.checkpoint;
    delete init.strict;
    if (saved.checkpoint) {
      init.checkpoint = saved.checkpoint;
      init.strict = saved.strict;
    }
  }
  recipe.init = init;
  for (const { f, read } of form.fieldReaders) {
    const path = f.path || `init.kwargs.${f.name}`;
    if ((initFactory && path.startsWith("init.")) || ((inputsFactory || fromFixture) && path.startsWith("inputs."))) continue;
    const r = read(problems);
    if (!r.set) continue;
    setPath(recipe, path, r.value);
  }
  const steps = /** @type {HTMLTextAreaElement | null} */ (form.find("#setup-steps"));
  if (steps && !form.part("#setup-steps-box").hidden) {
    recipe.steps_text = steps.value.split("\n").map((line) => line.trim()).filter(Boolean);
  }
  const before = /** @type {HTMLTextAreaElement | null} */ (form.find("#setup-before"));
  if (before && !form.part("#setup-before-box").hidden) {
    recipe.before_text = before.value.split("\n").map((line) => line.trim()).filter(Boolean);
  }
  const mesh = /** @type {HTMLInputElement | null} */ (form.find("#setup-mesh input"));
  if (mesh && !form.part("#setup-mesh").hidden) {
    const text = mesh.value.trim();
    if (text) recipe.mesh = text; // saved as the recipe's table
    else delete recipe.mesh;
  }
  const device = /** @type {HTMLSelectElement | null} */ (form.find("#setup-device select"));
  if (device && data.device && !form.part("#setup-device").hidden) recipe.device = device.value;
  const evidence = /** @type {HTMLSelectElement | null} */ (form.find("#setup-evidence select"));
  if (evidence && data.evidence && !form.part("#setup-evidence").hidden) { // drawn for the form's evidence only
    // The recipe's default is a key left out.
    if (evidence.value === data.evidence.default) delete recipe.evidence;
    else recipe.evidence = evidence.value;
  }
  return { recipe, problems };
}
