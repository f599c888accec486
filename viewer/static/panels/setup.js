// The setup form: a profile's inputs (shape, dtype, generator) and setup fields, from
// `GET api/setup`; "Save & capture" posts `api/profile` then `api/capture`. Validation
// comes from the server's recipe rules (`errors:[{path, message}]`), shown next to the
// control whose path matches and in a list.
//
// A setup field whose configuration class discovery read (`config`) is a nested group of
// that class's fields, prefilled with its defaults and saved as a `call` description
// (`{kind: "call", target, kwargs}`) holding only what the person changed. The init and
// the inputs may instead come from a factory (`factories`), with its contract written
// next to the field; Torch's evidence (`evidence`) is a choice of its own.

import { el, clear } from "../dom.js";
import { Panel } from "./panel.js";
import { collectRecipe, readLiteral, sameValue, parseShape, suggestName, controlIn } from "./setup-values.js";

// The dtype and generator lists and the profile-name rule come with the form (`api/setup`
// `schema`, from capture.recipe): the recipe's own definitions, never a copy here.

/**
 * @import {
 *   Json, Generator, TokenInfo, SetupInput, ConfigClass, SetupField, Factory, EvidenceChoice,
 *   Steps, MeshText, DeviceChoice, Need, SavedFilesSpec, FormSchema, RecipeInit, RecipeInputs,
 *   Recipe, SetupData, Problem, SaveAnswer, ReadBack, Reader, InputCard, ValueControl,
 *   FieldInput
 * } from "./setup-types.js"
 */

/** @extends {Panel<import("./panel.js").PanelStore>} */
export class SetupForm extends Panel {
  // onCaptureStarted(name): a capture of profile `name` was started from the form.
  /**
   * @param {import("./panel.js").PanelStore} store
   * @param {HTMLElement} root
   * @param {{api: import("../api.js").Api, onCaptureStarted: (name?: string | null) => void}} parts
   */
  constructor(store, root, { api, onCaptureStarted }) {
    super(store, "setup", root, { side: true });
    this.api = api;
    this.onCaptureStarted = onCaptureStarted;
    /** @type {SetupData | null} */
    this.data = null;
    /** @type {{f: SetupField, read: Reader}[]} */
    this.fieldReaders = []; // one per setup field: how to read it back into the recipe
    /** @type {{init?: () => string, inputs?: () => string}} */
    this.modes = {}; // "init" / "inputs": "literal" or "factory"
    /** @type {(() => void)[]} */
    this.tokenSyncs = []; // token bounds that follow a field, synced once the fields are drawn
    this.form = /** @type {HTMLFormElement} */ (root.querySelector("#setup-form"));
    this.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.save();
    });
    /** @type {HTMLElement} */ (root.querySelector("#setup-close")).addEventListener("click", () => this.close());
  }

  // An element of the form's own markup (index.html) or of what render() drew before it
  // is read: always there.
  /**
   * @param {string} selector
   * @returns {HTMLElement}
   */
  part(selector) {
    return this.root.querySelector(selector);
  }

  // An element that may not be drawn (yet): null then.
  /**
   * @param {string} selector
   * @returns {HTMLElement | null}
   */
  find(selector) {
    return this.root.querySelector(selector);
  }

  get profile() {
    return this.data ? this.data.profile : null;
  }

  // The server's schema, sent with every form (viewer/server/handlers.py form_schema).
  get schema() {
    const s = (this.data && this.data.schema) || {};
    return {
      dtypes: s.dtypes || [], generators: s.generators || [], fill: s.fill_generator || null, bounded: s.bounded_generator || null, default_dtype: s.default_dtype, profile_name: s.profile_name || null,
      profile_name_invalid: s.profile_name_invalid || null, profile_name_max: s.profile_name_max || null,
      profile_name_rule: s.profile_name_rule || null,
      saved_files: s.saved_files || null, default_framework: s.default_framework || "",
    };
  }

  // The recipe's framework: the saved one, else discovery's reading of the symbol, else the recipe's default.
  get framework() {
    const d = this.data || {};
    return (d.recipe && d.recipe.framework) || (d.symbol && d.symbol.framework) || this.schema.default_framework;
  }

  get needsInput() {
    return !!(this.data && this.data.needs && this.data.needs.length);
  }

  // False when the server has no setup provider (404): the form stays hidden.
  /** @param {string | null} [profile]  the form of this profile; without one, the embedder's current form */
  async load(profile) {
    try {
      this.data = await this.api.setup(profile);
    } catch {
      this.data = null;
      return false;
    }
    if (!this.data) return false;
    this.render();
    return true;
  }

  // The cursor goes where something is needed (an unknown shape), else the first field.
  shown() {
    const first = this.find("[aria-invalid=true]") || this.find("input");
    if (first) first.focus();
  }

  // eslint-disable-next-line complexity -- the form's sections in order, each only when the setup has it
  render() {
    const d = this.data;
    if (!d) return; // load() draws only a form it has
    const recipe = d.recipe || {};
    this.part("#setup-title").textContent = recipe.model || d.profile || "New profile";
    controlIn(this.root, "#setup-name").value = d.profile || suggestName(recipe, this.schema);

    const needs = this.part("#setup-needs");
    clear(needs);
    needs.hidden = !(d.needs && d.needs.length);
    if (d.needs && !needs.hidden) {
      needs.append(el("strong", {}, "Needed before capture: "));
      const ul = el("ul");
      for (const n of d.needs) ul.append(el("li", {}, typeof n === "string" ? n : n.message || n.path || JSON.stringify(n)));
      needs.append(ul);
    }
    this.renderEvidence(d.evidence);
    this.renderDevice(d.device);
    this.renderMesh(d.mesh);

    const factories = d.factories || {};
    this.tokenSyncs = [];
    const inputs = this.part("#setup-inputs");
    clear(inputs);
    const cards = el("div", { class: "setup-literal" });
    (d.inputs || []).forEach((inp, i) => cards.append(this.inputCard(inp, i)));
    if (!(d.inputs || []).length) cards.append(el("p", { class: "muted" }, "No array inputs."));
    this.modes.inputs = this.modeSection(inputs, "inputs", factories.inputs, cards, "Described inputs", "Inputs factory");

    const fields = this.part("#setup-fields");
    clear(fields);
    this.fieldReaders = [];
    const literal = el("div", { class: "setup-literal" });
    for (const f of d.fields || []) {
      const { node, read } = this.fieldControl(f, { nested: false, saved: f.value });
      literal.append(node);
      this.fieldReaders.push({ f, read });
    }
    if (!(d.fields || []).length) literal.append(el("p", { class: "muted" }, "No constructor arguments."));
    this.modes.init = this.modeSection(fields, "init", factories.init, literal, "Constructor arguments", "Init factory");
    this.part("#setup-fields-title").hidden = !(d.fields || []).length && !factories.init;
    this.renderSteps(d.steps);
    this.renderBefore(d.before);
    for (const sync of this.tokenSyncs) sync(); // token bounds from the fields just drawn
    this.renderSaved(recipe);
    const errors = this.part("#setup-errors");
    clear(errors);
    errors.hidden = true;
  }

  // Steps after construction, one a line in the shorthand's STEP grammar (read on the
  // server): model.setup_caches(max_batch_size=1, max_seq_length=64), config.vocab_size=100.
  /** @param {Steps | null | undefined} steps */
  renderSteps(steps) {
    let box = this.find("#setup-steps-box");
    if (!box) {
      box = /** @type {HTMLElement} */ (el("div", { id: "setup-steps-box", class: "steps" }));
      this.part("#setup-fields").after(box);
    }
    clear(box);
    box.hidden = !steps;
    if (!steps) return;
    const lines = steps.lines || [];
    const area = /** @type {HTMLTextAreaElement} */ (el("textarea", {
      id: "setup-steps", name: "steps", "data-path": "steps", rows: String(Math.max(2, lines.length + 1)),
      placeholder: "model.setup_caches(max_batch_size=1, max_seq_length=64)", spellcheck: "false", autocomplete: "off",
    }));
    area.value = lines.join("\n");
    box.append(el("h3", {}, "Steps after construction"),
      el("label", { class: "field wide" }, area, el("small", {}, steps.help || ""), el("div", { class: "field-error", hidden: true })));
  }

  // Calls before construction, one a line (a call VALUE, read on the server): library
  // state the constructor reads, fairscale's initialize_model_parallel(1).
  /** @param {Steps | null | undefined} before */
  renderBefore(before) {
    let box = this.find("#setup-before-box");
    if (!box) {
      box = /** @type {HTMLElement} */ (el("div", { id: "setup-before-box", class: "steps" }));
      this.part("#setup-fields").before(box);
    }
    clear(box);
    box.hidden = !before;
    if (!before) return;
    const lines = before.lines || [];
    const area = /** @type {HTMLTextAreaElement} */ (el("textarea", {
      id: "setup-before", name: "before", "data-path": "before", rows: String(Math.max(1, lines.length + 1)),
      placeholder: "fairscale.nn.model_parallel.initialize.initialize_model_parallel(1)", spellcheck: "false", autocomplete: "off",
    }));
    area.value = lines.join("\n");
    box.append(el("h3", {}, "Before construction"),
      el("label", { class: "field wide" }, area, el("small", {}, before.help || ""), el("div", { class: "field-error", hidden: true })));
  }

  // Torch's evidence: run the model, or shapes only (abstract). Only when the server offers it.
  /** @param {EvidenceChoice | null | undefined} evidence */
  renderEvidence(evidence) {
    let box = this.find("#setup-evidence");
    if (!box) {
      box = /** @type {HTMLElement} */ (el("div", { id: "setup-evidence", class: "evidence" }));
      this.part("#setup-needs").after(box);
    }
    clear(box);
    box.hidden = !evidence;
    if (!evidence) return;
    const select = el("select", { name: "evidence", "data-path": "evidence" },
      evidence.choices.map((c) => el("option", { value: c.value, selected: c.value === evidence.value }, c.label)));
    box.append(el("label", { class: "field" }, el("span", {}, "Evidence"), select,
      el("small", {}, "Abstract builds and runs the model on fake tensors: the same ops, modules and shapes, no values."),
      el("div", { class: "field-error", hidden: true })));
  }

  // The recipe's device (`device`): cpu, cuda:0, tpu (JAX), as the server offers them.
  /** @param {DeviceChoice | null | undefined} device */
  renderDevice(device) {
    let box = this.find("#setup-device");
    if (!box) {
      box = /** @type {HTMLElement} */ (el("div", { id: "setup-device", class: "device" }));
      (this.find("#setup-evidence") || this.part("#setup-needs")).after(box);
    }
    clear(box);
    box.hidden = !device;
    if (!device) return;
    const select = el("select", { name: "device", "data-path": "device" },
      device.choices.map((c) => el("option", { value: c.value, selected: c.value === device.value }, c.label)));
    box.append(el("label", { class: "field" }, el("span", {}, "Device"), select, el("small", {}, device.help || ""),
      el("div", { class: "field-error", hidden: true })));
  }

  // The device mesh (`mesh`): `data=4,model=2`, simulated on cpu; the server reads the text
  // (capture.recipe's one reader of that spelling) and explains it (`help`).
  /** @param {MeshText | null | undefined} mesh */
  renderMesh(mesh) {
    let box = this.find("#setup-mesh");
    if (!box) {
      box = /** @type {HTMLElement} */ (el("div", { id: "setup-mesh", class: "mesh" }));
      (this.find("#setup-device") || this.find("#setup-evidence") || this.part("#setup-needs")).after(box);
    }
    clear(box);
    box.hidden = !mesh;
    if (!mesh) return;
    const input = el("input", { type: "text", name: "mesh", "data-path": "mesh", value: mesh.value || "",
                                placeholder: mesh.placeholder || "", spellcheck: "false", autocomplete: "off" });
    box.append(el("label", { class: "field" }, el("span", {}, "Mesh"), input, el("small", {}, mesh.help || ""),
      el("div", { class: "field-error", hidden: true })));
  }

  // A section that is either described here (`literal`) or made by a factory of the
  // person's (`factory`: {value, contract, placeholder}); returns a getter of the mode.
  /**
   * @param {HTMLElement} holder
   * @param {"init" | "inputs"} section
   * @param {Factory | null | undefined} factory
   * @param {HTMLElement} literal
   * @param {string} literalLabel
   * @param {string} factoryLabel
   * @returns {() => string}
   */
  modeSection(holder, section, factory, literal, literalLabel, factoryLabel) {
    if (!factory) {
      holder.append(literal);
      return () => "literal";
    }
    let mode = factory.value ? "factory" : "literal";
    const name = `${section}-mode`;
    const radio = (/** @type {string} */ value, /** @type {string} */ label) => el("label", { class: "mode" },
      el("input", { type: "radio", name, value, checked: mode === value, "data-mode": `${section}:${value}` }), label);
    const ref = el("input", {
      name: `${section}-factory`, "data-path": `${section}.factory`, value: factory.value || "",
      placeholder: factory.placeholder || "module:function", autocomplete: "off", spellcheck: "false",
    });
    const made = el("label", { class: "field factory", "data-factory": section },
      el("span", {}, `${section === "init" ? "Init" : "Inputs"} factory`), ref,
      el("small", { class: "contract" }, factory.contract || ""),
      el("div", { class: "field-error", hidden: true }));
    const switcher = el("div", { class: "mode-switch", role: "radiogroup" }, radio("literal", literalLabel), radio("factory", factoryLabel));
    const sync = () => {
      literal.hidden = mode !== "literal";
      made.hidden = mode !== "factory";
    };
    switcher.addEventListener("change", (/** @type {Event} */ e) => {
      const radio = /** @type {HTMLInputElement | null} */ (e.target); // the switch holds only its radios
      if (radio && radio.name === name) mode = radio.value;
      sync();
    });
    holder.append(switcher, literal, made);
    sync();
    return () => mode;
  }

  // An input is a tensor (shape, dtype, generator) or a value typed as text in the
  // shorthand's VALUE grammar (none, false, 3, Config(...)): a choice on the card.
  /**
   * @param {SetupInput} inp
   * @param {number} i  its position among the inputs
   * @returns {InputCard}
   */
  inputCard(inp, i) {
    const card = this.tensorCard(inp, i);
    const path = inp.path || `inputs.args[${i}]`;
    const text = el("input", {
      name: "value-text", "data-path": path, value: inp.text || "", autocomplete: "off", spellcheck: "false",
      placeholder: "none, true, 3, 'text', Config(n=2)",
    });
    const valueLabel = el("label", { class: "wide input-value" }, el("span", { class: "label-row" }, "value"), text);
    const kind = /** @type {HTMLSelectElement} */ (el("select", { name: "input-kind", "aria-label": `${inp.name || "input"}: a tensor or a value` },
      el("option", { value: "tensor", selected: inp.kind !== "value" }, "tensor"),
      el("option", { value: "value", selected: inp.kind === "value" }, "value (none, a number, a call…)")));
    // The tensor's own controls go in one box, hidden as a whole (their own hidden
    // states, the fill value and the bound, stay theirs).
    const tensorBox = el("div", { class: "tensor-parts" });
    tensorBox.append(...[...card.children].slice(1).filter((n) => !n.classList.contains("field-error")));
    const name = /** @type {HTMLElement} */ (card.firstElementChild); // the card's name row (tensorCard)
    name.after(tensorBox);
    const sync = () => {
      const asValue = kind.value === "value";
      tensorBox.hidden = asValue;
      valueLabel.hidden = !asValue;
      card.dataset.kind = kind.value;
      const shapeInput = controlIn(card, "[name=shape]");
      if (asValue) shapeInput.removeAttribute("aria-invalid");
    };
    kind.addEventListener("change", sync);
    name.after(el("label", { class: "wide input-kind" }, el("span", { class: "label-row" }, "is"), kind), valueLabel);
    if (inp.needed) name.append(el("small", { class: "need" }, ` optional, but needed: ${inp.needed}`));
    sync();
    return card;
  }

  /**
   * @param {SetupInput} inp
   * @param {number} i
   * @returns {InputCard}
   */
  // eslint-disable-next-line complexity -- an array input's controls (shape, dtype, generator, token note)
  tensorCard(inp, i) {
    const path = inp.path || `inputs.args[${i}]`;
    const shape = inp.shape || [];
    const unknown = (inp.unknown || []).map(String);
    // Unknown dimensions stay visible by name, to be replaced by a number.
    const shapeText = shape.map((x) => (x === null || x === undefined ? "?" : String(x))).join(", ");
    /** @type {InputCard} */
    const card = el("div", { class: "input-card", "data-input": inp.name || String(i), "data-path": path });
    card.append(el("div", { class: "input-name" }, inp.name || `argument ${i}`, inp.annotation ? el("span", { class: "muted" }, `: ${inp.annotation}`) : null));
    /** @type {HTMLInputElement} */
    const shapeInput = el("input", {
      name: "shape", value: shapeText, "data-path": path + ".shape", placeholder: "e.g. 2, 3", autocomplete: "off", spellcheck: "false",
    });
    const missing = shape.some((x) => typeof x !== "number") || unknown.length;
    if (missing) shapeInput.setAttribute("aria-invalid", "true");
    // Named unknown dimensions (`batch`) are worth repeating; "all dimensions" is just "needed".
    const names = [...new Set(shape.filter((x) => typeof x !== "number").map((x) => (x === null || x === undefined ? "?" : String(x))).concat(unknown))]
      .filter((n) => n !== "?" && n !== "all dimensions");
    const need = missing ? el("span", { class: "need" }, names.length ? `needed: ${names.join(", ")}` : "needed") : null;
    card.append(el("label", { class: "wide" }, el("span", { class: "label-row" }, "shape", need), shapeInput));
    if (missing) {
      card.dataset.needed = "shape";
      // Typing a whole shape settles it: the red mark goes as soon as it is not needed.
      shapeInput.addEventListener("input", () => {
        const ok = parseShape(shapeInput.value).every((x) => typeof x === "number") && shapeInput.value.trim() !== "";
        if (ok) shapeInput.removeAttribute("aria-invalid");
        else shapeInput.setAttribute("aria-invalid", "true");
        need.hidden = ok;
      });
    }
    const { dtypes, generators, default_dtype: fallback, fill, bounded } = this.schema;
    const dtype = el("select", { name: "dtype", "data-path": path + ".dtype" }, dtypes.map((t) => el("option", { value: t, selected: t === (inp.dtype || fallback) }, t)));
    if (inp.dtype && !dtypes.includes(inp.dtype)) dtype.prepend(el("option", { value: inp.dtype, selected: true }, inp.dtype));
    card.append(el("label", {}, "dtype", dtype));
    const gen = inp.generator || { kind: "normal" };
    /** @type {HTMLSelectElement} */
    const genSel = el("select", { name: "generator", "data-path": path + ".generator" }, generators.map((g) => el("option", { value: g, selected: g === gen.kind }, g)));
    if (gen.kind && !generators.includes(gen.kind)) genSel.prepend(el("option", { value: gen.kind, selected: true }, gen.kind));
    card.append(el("label", {}, "generator", genSel));
    // Only the fill generator takes a value, and the bounded one its bound; the others need none (or keep the saved ones).
    const genValue = el("input", { name: "generator-value", value: gen.value !== undefined ? String(gen.value) : "", "data-path": path + ".generator.value", placeholder: "e.g. 1", inputmode: "decimal" });
    const valueLabel = el("label", { class: "gen-value" }, "fill value", genValue);
    /** @type {HTMLInputElement} */
    const genHigh = el("input", { name: "generator-high", value: gen.high !== undefined && gen.high !== null ? String(gen.high) : "", "data-path": path + ".generator.high", placeholder: "e.g. 100", inputmode: "numeric" });
    const highLabel = el("label", { class: "gen-value" }, "below (high)", genHigh);
    const showValue = () => {
      valueLabel.hidden = genSel.value !== fill;
      highLabel.hidden = genSel.value !== bounded;
    };
    genSel.addEventListener("change", showValue);
    showValue();
    card.append(valueLabel, highLabel);
    if (inp.token) card.append(this.tokenNote(inp.token, genHigh));
    card.append(el("div", { class: "field-error", hidden: true }));
    card._inp = inp;
    return card;
  }

  // Token ids are drawn below the vocabulary: the bound follows the config field the code
  // reads it from (`config.vocab_size`) until the person sets it here.
  /**
   * @param {TokenInfo} token
   * @param {HTMLInputElement} genHigh  the bound's input
   */
  tokenNote(token, genHigh) {
    const note = el("small", { class: "token-note wide" });
    const say = () => {
      const bound = genHigh.value.trim();
      // An unknown vocabulary is said, never made up: the bound is to fill in.
      if (bound) genHigh.removeAttribute("aria-invalid");
      else genHigh.setAttribute("aria-invalid", "true");
      note.textContent = (bound ? `Token ids, drawn below ${bound}` : "Token ids: enter the vocabulary size (below (high)); the code does not say it") +
        (token.high_from ? ` (${token.high_from})` : "") + (token.reason ? `: ${token.reason}.` : ".");
    };
    let touched = false;
    genHigh.addEventListener("input", () => {
      touched = true;
      say();
    });
    if (token.high_path) {
      // The bounding field is drawn after the inputs: read when drawn, and as it changes.
      const follow = (/** @type {ValueControl | null} */ field) => {
        if (touched || !field) return;
        const n = Number(field.value.trim() || field.dataset.default);
        if (Number.isInteger(n) && n > 0) genHigh.value = String(n);
        say();
      };
      this.root.addEventListener("input", (/** @type {Event} */ e) => {
        const t = /** @type {ValueControl | null} */ (e.target); // "input" comes from the form's value controls
        if (t && t.dataset && t.dataset.path === token.high_path) follow(t);
      });
      this.tokenSyncs.push(() => follow(/** @type {ValueControl | null} */ (this.find(`[data-path="${token.high_path}"]`))));
    }
    say();
    return note;
  }

  // Trained weights and a saved batch (Torch): init.checkpoint / init.strict and
  // inputs.fixture / inputs.fixture_keys. Empty paths: fresh initialisation, the inputs above.
  /** @param {Recipe} recipe */
  renderSaved(recipe) {
    const box = this.find("#setup-saved");
    const holder = this.find("#setup-saved-fields");
    if (!box || !holder) return;
    clear(holder);
    const spec = this.schema.saved_files;
    box.hidden = !spec || !(spec.frameworks || []).includes(this.framework);
    if (!spec || box.hidden) return;
    /** @type {RecipeInit} */
    const init = recipe.init && typeof recipe.init === "object" ? recipe.init : {};
    /** @type {RecipeInputs} */
    const inputs = recipe.inputs && typeof recipe.inputs === "object" ? recipe.inputs : {};
    // A text field of the section: its input and its label.
    /**
     * @param {string} name
     * @param {string} path
     * @param {string | undefined} value
     * @param {string} placeholder
     * @param {string} help
     * @returns {[HTMLInputElement, HTMLElement]}
     */
    const text = (name, path, value, placeholder, help) => {
      const input = el("input", { name, "data-path": path, value: value || "", placeholder, autocomplete: "off", spellcheck: "false" });
      return [input, el("label", { class: "field saved-file", "data-saved": name }, el("span", {}, name.replace("_", " ")), input,
        el("small", {}, help), el("div", { class: "field-error", hidden: true }))];
    };
    const [ckpt, ckptLabel] = text("checkpoint", "init.checkpoint", init.checkpoint, "runs/best.pt",
      `A state dict to load into the model (${(spec.checkpoint || []).join(", ")}; .pt weights-only), relative to the workspace. Empty: fresh initialisation.`);
    /** @type {HTMLInputElement} */
    const strict = el("input", { type: "checkbox", name: "strict", "data-path": "init.strict", checked: init.strict !== false });
    const strictLabel = el("label", { class: "field saved-file check", "data-saved": "strict" },
      el("span", {}, "strict key checking"), strict,
      el("small", {}, "Missing or unexpected keys fail the capture; off, they are listed in About this capture."),
      el("div", { class: "field-error", hidden: true }));
    const [fixture, fixtureLabel] = text("fixture", "inputs.fixture", inputs.fixture, "data/batch.pt",
      `A saved batch (${(spec.fixture || []).join(", ")}): its names bind to forward's parameters. It replaces the inputs above.`);
    const keys = inputs.fixture_keys && typeof inputs.fixture_keys === "object"
      ? Object.entries(inputs.fixture_keys).map(([k, v]) => `${k}=${v}`).join(", ") : "";
    const [keysInput, keysLabel] = text("fixture_keys", "inputs.fixture_keys", keys, "ids=input_ids, mask=attention_mask",
      "Optional: which fixture key is which parameter (KEY=PARAM, or KEY=args[N]); only these keys are used.");
    const sync = () => {
      strict.disabled = !ckpt.value.trim();
      strictLabel.classList.toggle("muted", strict.disabled);
      keysInput.disabled = !fixture.value.trim();
      const inputsBox = this.part("#setup-inputs");
      inputsBox.classList.toggle("replaced", !!fixture.value.trim());
      inputsBox.title = fixture.value.trim() ? "The fixture gives the inputs" : "";
    };
    ckpt.addEventListener("input", sync);
    fixture.addEventListener("input", sync);
    holder.append(ckptLabel, strictLabel, fixtureLabel, keysLabel);
    sync();
  }

  // {checkpoint, strict, fixture, fixture_keys} from the form, or null without that section.
  /**
   * @param {Problem[]} problems
   * @returns {{checkpoint: string, strict: boolean, fixture: string, fixture_keys: Record<string, string>} | null}
   */
  savedFiles(problems) {
    const box = this.find("#setup-saved");
    if (!box || box.hidden) return null;
    const value = (/** @type {string} */ name) => controlIn(box, `[name=${name}]`).value.trim();
    const keysInput = controlIn(box, "[name=fixture_keys]");
    /** @type {Record<string, string>} */
    const keys = {};
    for (const part of value("fixture_keys").split(",").map((p) => p.trim()).filter(Boolean)) {
      const m = /^([^=]+)=(.+)$/.exec(part);
      if (!m) {
        problems.push({ path: keysInput.dataset.path, message: `"${part}" is not KEY=PARAM` });
        continue;
      }
      keys[m[1].trim()] = m[2].trim();
    }
    const strict = /** @type {HTMLInputElement} */ (box.querySelector("[name=strict]")); // the checkbox renderSaved drew
    return { checkpoint: value("checkpoint"), strict: strict.checked, fixture: value("fixture"), fixture_keys: keys };
  }

  // One setup field: {node, read(problems) → {set, value}}. `nested`: a field of a config
  // class, written only when it differs from the class's default (or was saved); `saved`:
  // the value the profile holds for it.
  /**
   * @param {SetupField} f
   * @param {{nested: boolean, saved: Json}} options
   * @returns {{node: HTMLElement, read: Reader}}
   */
  // eslint-disable-next-line complexity -- one control per field type (choice, bool, config class, factory, literal)
  fieldControl(f, { nested, saved }) {
    if (f.config) return this.configGroup(f, { nested, saved });
    const path = f.path || `init.kwargs.${f.name}`;
    const type = (f.type || f.annotation || "str").toLowerCase();
    const hasSaved = saved !== undefined;
    const value = hasSaved ? saved : f.suggested !== undefined ? f.suggested : f.default;
    const shownDefault = f.default_text !== undefined ? `= ${f.default_text}` : f.default === null && !f.required ? "None" : "";
    /** @type {FieldInput} */
    let input;
    if ((type === "bool" || typeof value === "boolean") && f.default_text === undefined && value !== null) {
      input = el("select", { name: f.name, "data-path": path, "data-type": "bool" },
        el("option", { value: "true", selected: value === true }, "True"), el("option", { value: "false", selected: value !== true }, "False"));
    } else if (type === "value") {
      // Typed as the shorthand's VALUE: a call, a class, none, a list… read on the server.
      input = el("input", {
        name: f.name, "data-path": path, "data-type": "value", value: f.text || "",
        placeholder: f.example ? `e.g. ${f.example}` : f.required ? "required: none, 3, 'text', Config(n=2)" : shownDefault,
        autocomplete: "off", spellcheck: "false",
      });
      if (f.required && !f.text) input.setAttribute("aria-invalid", "true");
    } else if (f.choices && f.choices.length) {
      const options = f.choices.map((c) => el("option", { value: String(c), selected: c === value }, typeof c === "string" ? c : JSON.stringify(c)));
      // A choice left at a None or non-literal default stays unset.
      if (nested && (value === null || value === undefined)) options.unshift(el("option", { value: "", selected: true }, shownDefault || "(default)"));
      input = el("select", { name: f.name, "data-path": path, "data-type": type }, options);
      input._choices = nested && (value === null || value === undefined) ? [undefined, ...f.choices] : f.choices;
    } else {
      input = el("input", {
        name: f.name, "data-path": path, "data-type": type,
        value: value === undefined || value === null ? "" : typeof value === "object" ? JSON.stringify(value) : String(value),
        inputmode: type === "int" || type === "float" ? "decimal" : undefined,
        placeholder: f.required ? "required" : shownDefault,
        autocomplete: "off", spellcheck: "false",
      });
      if (f.required && (value === undefined || value === null)) input.setAttribute("aria-invalid", "true");
    }
    if (f.default !== undefined && f.default !== null) input.dataset.default = typeof f.default === "object" ? JSON.stringify(f.default) : String(f.default);
    // In a group the annotation goes under the name (two fields a row leave no room beside it).
    const head = nested
      ? el("span", { title: f.annotation ? `${f.name}: ${f.annotation}` : f.name }, f.name,
        f.annotation ? el("code", { class: "muted annotation" }, f.annotation) : null)
      : el("span", {}, f.name, f.annotation ? el("code", { class: "muted" }, `  ${f.annotation}`) : null);
    const label = el("label", { class: "field", [nested ? "data-config-field" : "data-field"]: f.name }, head,
      input,
      f.default_text !== undefined ? el("small", {}, `Default in the source: ${f.default_text} (left unset unless you fill it in).`) : null,
      f.help ? el("small", {}, f.help) : null,
      el("div", { class: "field-error", hidden: true }));
    /** @type {Reader} */
    const read = (problems) => {
      if (type === "value") {
        const raw = input.value.trim();
        if (!raw) {
          if (f.required) problems.push({ path, message: `${f.name} is needed` });
          return { set: false };
        }
        return { set: true, value: { kind: "text", text: raw } };
      }
      const r = readLiteral(input, type, problems, f);
      if (!r.set) {
        if (f.required) problems.push({ path, message: `${f.name} is needed` });
        return r;
      }
      // A nested field is saved only when it says something its class's default does not.
      if (nested && !hasSaved && f.default_text === undefined && sameValue(r.value, f.default)) return { set: false };
      return r;
    };
    return { node: label, read };
  }

  // A configuration class's fields as a nested group ("GPTConfig · 7 fields"), saved as
  // {kind: "call", target, kwargs: {the fields that differ}}. A saved value that is not a
  // call of this class (another target, a literal) is kept as saved unless the person
  // chooses to edit the class's fields instead.
  /**
   * @param {SetupField} f  a field with a configuration class (`config`)
   * @param {{nested: boolean, saved: Json}} options
   * @returns {{node: HTMLElement, read: Reader}}
   */
  // eslint-disable-next-line complexity -- a configuration class's fields with their defaults and saved values
  configGroup(f, { nested, saved }) {
    const cfg = /** @type {ConfigClass} */ (f.config); // fieldControl's test
    const path = f.path;
    const hasSaved = saved !== undefined && saved !== null;
    const ownCall = hasSaved && typeof saved === "object" && saved.kind === "call" && saved.target === cfg.target;
    const savedKwargs = ownCall ? saved.kwargs || {} : {};
    let keep = hasSaved && !ownCall;
    /** @type {{sub: SetupField, read: Reader}[]} */
    const readers = [];
    const body = el("div", { class: "config-fields" });
    for (const sub of cfg.fields) {
      const { node, read } = this.fieldControl(sub, { nested: true, saved: savedKwargs[sub.name] });
      body.append(node);
      readers.push({ sub, read });
    }
    const count = `${cfg.fields.length} field${cfg.fields.length === 1 ? "" : "s"}`;
    const summary = el("summary", {}, el("strong", {}, cfg.name), ` · ${count}`, el("span", { class: "muted" }, `  ${cfg.where || ""}`));
    const details = el("details", { open: !nested || ownCall }, summary,
      el("small", { class: "contract" }, (cfg.fields.some((s) => s.suggested !== undefined || s.text)
        ? `Prefilled with what the command line suggests (small sizes, required fields) over ${cfg.name}'s defaults; what differs from the defaults is saved, as a call of ${cfg.target}.`
        : `Prefilled with ${cfg.name}'s defaults; only what you change is saved, as a call of ${cfg.target}.`) +
        (cfg.complete === false ? " A base class TensorViz cannot read may take more fields." : "")),
      body);
    const group = el("fieldset", { class: "config-group", [nested ? "data-config-field" : "data-field"]: f.name, "data-config": path, "data-path": path },
      el("legend", {}, f.name, f.annotation ? el("code", { class: "muted" }, `  ${f.annotation}`) : null));
    if (keep) {
      const kept = el("div", { class: "kept" }, el("small", {}, "Saved as: "), el("code", {}, JSON.stringify(saved)),
        el("button", { type: "button", class: "link", onclick: () => {
          keep = false;
          kept.hidden = true;
          details.hidden = false;
          details.open = true;
        } }, `Edit ${cfg.name}'s fields instead`));
      details.hidden = true;
      group.append(kept);
    }
    group.append(details, el("div", { class: "field-error", hidden: true }));
    /** @type {Reader} */
    const read = (problems) => {
      if (keep) return { set: true, value: saved };
      /** @type {Record<string, Json>} */
      const kwargs = {};
      for (const { sub, read: readSub } of readers) {
        const r = readSub(problems);
        if (r.set) kwargs[sub.name] = r.value;
      }
      // A nested class left at its defaults stays unset: its own default applies.
      if (nested && !ownCall && !Object.keys(kwargs).length) return { set: false };
      /** @type {{kind: "call", target: string, args?: Json[], kwargs?: Record<string, Json>}} */
      const call = { kind: "call", target: cfg.target };
      if (ownCall && saved.args && saved.args.length) call.args = saved.args;
      if (Object.keys(kwargs).length) call.kwargs = kwargs;
      return { set: true, value: call };
    };
    return { node: group, read };
  }

  // The recipe to save (setup-values.js collectRecipe).
  /** @returns {{recipe: Recipe, problems: Problem[]}} */
  collect() {
    return collectRecipe(this);
  }

  /** @param {Problem[]} errors */
  showErrors(errors) {
    const list = this.part("#setup-errors");
    clear(list);
    list.hidden = !errors.length;
    this.root.querySelectorAll(".field-error").forEach((/** @type {HTMLElement} */ n) => {
      n.hidden = true;
      n.textContent = "";
    });
    this.root.querySelectorAll("[data-path][aria-invalid]").forEach((/** @type {Element} */ n) => n.removeAttribute("aria-invalid"));
    for (const e of errors) {
      list.append(el("li", {}, e.path ? el("code", {}, e.path) : null, e.path ? ": " : "", e.message));
      const control = this.controlFor(e.path || "");
      if (control) {
        control.setAttribute("aria-invalid", "true");
        const holder = control.closest(".input-card, .field, .config-group");
        const slot = holder && /** @type {HTMLElement | undefined} */ ([...holder.querySelectorAll(".field-error")].pop());
        if (slot) {
          slot.hidden = false;
          slot.textContent = (slot.textContent ? slot.textContent + " " : "") + e.message;
        }
      }
    }
  }

  // The control whose path is the longest prefix of `path` (or the other way round), among those shown.
  /**
   * @param {string} path
   * @returns {HTMLElement | null}
   */
  controlFor(path) {
    if (!path) return null;
    const norm = (/** @type {string | undefined} */ p) => String(p).replace(/\[(\w+)\]/g, ".$1").replace(/^\./, "");
    const want = norm(path);
    /** @type {HTMLElement | null} */
    let best = null;
    let bestLen = -1;
    this.root.querySelectorAll("[data-path]").forEach((/** @type {HTMLElement} */ n) => {
      if (n.classList.contains("input-card") || n.closest("[hidden]")) return;
      const p = norm(n.dataset.path);
      if ((want === p || want.startsWith(p + ".") || p.startsWith(want + ".")) && p.length > bestLen) {
        best = n;
        bestLen = p.length;
      }
    });
    return best;
  }

  /** @param {string} text */
  setStatus(text) {
    this.part("#setup-status").textContent = text;
  }

  /** @returns {Promise<boolean>} whether the profile was saved and its capture started */
  async save() {
    const nameInput = controlIn(this.root, "#setup-name");
    const name = nameInput.value.trim();
    const rule = this.schema.profile_name;
    if (!name || (rule && !new RegExp(rule).test(name))) {
      const words = this.schema.profile_name_rule;
      this.showErrors([{ path: "name", message: words ? `a profile name is ${words}` : "this profile name is not allowed" }]);
      nameInput.setAttribute("aria-invalid", "true");
      return false;
    }
    const { recipe, problems } = this.collect();
    if (problems.length) {
      this.showErrors(problems);
      return false;
    }
    this.setStatus("Saving…");
    /** @type {SaveAnswer | null | undefined} */
    let res;
    try {
      res = await this.api.saveProfile(name, recipe);
    } catch (err) {
      const e = /** @type {Error & {body?: SaveAnswer}} */ (err); // an ApiError carries the answer's body
      res = e.body && e.body.errors ? e.body : { ok: false, errors: [{ path: "", message: e.message || String(err) }] };
    }
    if (!res || !res.ok) {
      this.setStatus("");
      this.showErrors((res && res.errors) || [{ path: "", message: "the profile was not saved" }]);
      return false;
    }
    this.showErrors([]);
    const data = /** @type {SetupData} */ (this.data); // saved from the form load() drew
    data.profile = name;
    data.needs = [];
    this.part("#setup-needs").hidden = true; // saved: what was needed is given
    this.setStatus("Saved. Starting capture…");
    return this.capture(name);
  }

  // A capture of profile `name`, the form's by default. Without a profile, the server
  // refuses it (400 "profile (a string) is required"), said in the status line.
  /**
   * @param {string | null} [name]
   * @returns {Promise<boolean>} whether it was started
   */
  async capture(name = this.profile) {
    try {
      const res = await this.api.startCapture(/** @type {string} */ (name));
      if (res && res.started === false) throw new Error(res.message || "capture was not started");
      this.setStatus("Capture started.");
      this.onCaptureStarted(name);
      return true;
    } catch (err) {
      this.setStatus(`Could not start the capture: ${/** @type {Error} */ (err).message || err}`);
      return false;
    }
  }
}
