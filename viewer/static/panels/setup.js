// The setup form: a profile's inputs (shape, dtype, generator) and setup fields, from
// `GET api/setup`; "Save & capture" posts `api/profile` then `api/capture`. Validation
// comes from the server's recipe rules (`errors:[{path, message}]`), shown next to the
// control whose path matches and in a list.

import { el, clear } from "../dom.js";
import { Panel } from "./panel.js";

// The dtype and generator lists and the profile-name rule come with the form (`api/setup`
// `schema`, from capture.recipe): the recipe's own definitions, never a copy here.

export class SetupForm extends Panel {
  constructor(store, root, { api, onCaptureStarted }) {
    super(store, "setup", root, { side: true });
    this.api = api;
    this.onCaptureStarted = onCaptureStarted;
    this.data = null;
    this.form = root.querySelector("#setup-form");
    this.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.save();
    });
    root.querySelector("#setup-close").addEventListener("click", () => this.close());
  }

  get profile() {
    return this.data ? this.data.profile : null;
  }

  // The server's schema, sent with every form (viewer/server/app.py form_schema).
  get schema() {
    const s = (this.data && this.data.schema) || {};
    return {
      dtypes: s.dtypes || [], generators: s.generators || [], default_dtype: s.default_dtype, profile_name: s.profile_name || null,
      profile_name_invalid: s.profile_name_invalid || null, profile_name_max: s.profile_name_max || null,
      profile_name_rule: s.profile_name_rule || null,
      saved_files: s.saved_files || null,
    };
  }

  // The recipe's framework: the saved one, else discovery's reading of the symbol (Torch when neither says).
  get framework() {
    const d = this.data || {};
    return (d.recipe && d.recipe.framework) || (d.symbol && d.symbol.framework) || "torch";
  }

  get needsInput() {
    return !!(this.data && this.data.needs && this.data.needs.length);
  }

  // False when the server has no setup provider (404): the form stays hidden.
  async load(profile) {
    try {
      this.data = await this.api.setup(profile);
    } catch (err) {
      this.data = null;
      return false;
    }
    if (!this.data) return false;
    this.render();
    return true;
  }

  // The cursor goes where something is needed (an unknown shape), else the first field.
  shown() {
    const first = this.root.querySelector("[aria-invalid=true]") || this.root.querySelector("input");
    if (first) first.focus();
  }

  render() {
    const d = this.data;
    const recipe = d.recipe || {};
    this.root.querySelector("#setup-title").textContent = recipe.model || d.profile || "New profile";
    this.root.querySelector("#setup-name").value = d.profile || suggestName(recipe, this.schema);

    const needs = this.root.querySelector("#setup-needs");
    clear(needs);
    needs.hidden = !(d.needs && d.needs.length);
    if (!needs.hidden) {
      needs.append(el("strong", {}, "Needed before capture: "));
      const ul = el("ul");
      for (const n of d.needs) ul.append(el("li", {}, typeof n === "string" ? n : n.message || n.path || JSON.stringify(n)));
      needs.append(ul);
    }

    const inputs = this.root.querySelector("#setup-inputs");
    clear(inputs);
    (d.inputs || []).forEach((inp, i) => inputs.append(this.inputCard(inp, i)));
    if (!(d.inputs || []).length) inputs.append(el("p", { class: "muted" }, "No array inputs."));

    const fields = this.root.querySelector("#setup-fields");
    clear(fields);
    (d.fields || []).forEach((f) => fields.append(this.fieldControl(f)));
    this.root.querySelector("#setup-fields-title").hidden = !(d.fields || []).length;
    this.renderSaved(recipe);
    const errors = this.root.querySelector("#setup-errors");
    clear(errors);
    errors.hidden = true;
  }

  inputCard(inp, i) {
    const path = inp.path || `inputs.args[${i}]`;
    const shape = inp.shape || [];
    const unknown = (inp.unknown || []).map(String);
    // Unknown dimensions stay visible by name, to be replaced by a number.
    const shapeText = shape.map((x) => (x === null || x === undefined ? "?" : String(x))).join(", ");
    const card = el("div", { class: "input-card", "data-input": inp.name || String(i), "data-path": path });
    card.append(el("div", { class: "input-name" }, inp.name || `argument ${i}`, inp.annotation ? el("span", { class: "muted" }, `: ${inp.annotation}`) : null));
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
    const { dtypes, generators, default_dtype: fallback } = this.schema;
    const dtype = el("select", { name: "dtype", "data-path": path + ".dtype" }, dtypes.map((t) => el("option", { value: t, selected: t === (inp.dtype || fallback) }, t)));
    if (inp.dtype && !dtypes.includes(inp.dtype)) dtype.prepend(el("option", { value: inp.dtype, selected: true }, inp.dtype));
    card.append(el("label", {}, "dtype", dtype));
    const gen = inp.generator || { kind: "normal" };
    const genSel = el("select", { name: "generator", "data-path": path + ".generator" }, generators.map((g) => el("option", { value: g, selected: g === gen.kind }, g)));
    if (gen.kind && !generators.includes(gen.kind)) genSel.prepend(el("option", { value: gen.kind, selected: true }, gen.kind));
    card.append(el("label", {}, "generator", genSel));
    // Only `full` takes a value; the other generators need none (or keep the saved ones).
    const genValue = el("input", { name: "generator-value", value: gen.value !== undefined ? String(gen.value) : "", "data-path": path + ".generator.value", placeholder: "e.g. 1", inputmode: "decimal" });
    const valueLabel = el("label", { class: "gen-value" }, "fill value", genValue);
    const showValue = () => (valueLabel.hidden = genSel.value !== "full");
    genSel.addEventListener("change", showValue);
    showValue();
    card.append(valueLabel);
    card.append(el("div", { class: "field-error", hidden: true }));
    card._inp = inp;
    return card;
  }

  // Trained weights and a saved batch (Torch): init.checkpoint / init.strict and
  // inputs.fixture / inputs.fixture_keys. Empty paths: fresh initialisation, the inputs above.
  renderSaved(recipe) {
    const box = this.root.querySelector("#setup-saved");
    const holder = this.root.querySelector("#setup-saved-fields");
    if (!box || !holder) return;
    clear(holder);
    const spec = this.schema.saved_files;
    box.hidden = !spec || !(spec.frameworks || []).includes(this.framework);
    if (box.hidden) return;
    const init = recipe.init && typeof recipe.init === "object" ? recipe.init : {};
    const inputs = recipe.inputs && typeof recipe.inputs === "object" ? recipe.inputs : {};
    const text = (name, path, value, placeholder, help) => {
      const input = el("input", { name, "data-path": path, value: value || "", placeholder, autocomplete: "off", spellcheck: "false" });
      return [input, el("label", { class: "field saved-file", "data-saved": name }, el("span", {}, name.replace("_", " ")), input,
        el("small", {}, help), el("div", { class: "field-error", hidden: true }))];
    };
    const [ckpt, ckptLabel] = text("checkpoint", "init.checkpoint", init.checkpoint, "runs/best.pt",
      `A state dict to load into the model (${(spec.checkpoint || []).join(", ")}; .pt weights-only), relative to the workspace. Empty: fresh initialisation.`);
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
      const inputsBox = this.root.querySelector("#setup-inputs");
      inputsBox.classList.toggle("replaced", !!fixture.value.trim());
      inputsBox.title = fixture.value.trim() ? "The fixture gives the inputs" : "";
    };
    ckpt.addEventListener("input", sync);
    fixture.addEventListener("input", sync);
    holder.append(ckptLabel, strictLabel, fixtureLabel, keysLabel);
    sync();
  }

  // {checkpoint, strict, fixture, fixture_keys} from the form, or null without that section.
  savedFiles(problems) {
    const box = this.root.querySelector("#setup-saved");
    if (!box || box.hidden) return null;
    const value = (name) => box.querySelector(`[name=${name}]`).value.trim();
    const keysInput = box.querySelector("[name=fixture_keys]");
    const keys = {};
    for (const part of value("fixture_keys").split(",").map((p) => p.trim()).filter(Boolean)) {
      const m = /^([^=]+)=(.+)$/.exec(part);
      if (!m) {
        problems.push({ path: keysInput.dataset.path, message: `"${part}" is not KEY=PARAM` });
        continue;
      }
      keys[m[1].trim()] = m[2].trim();
    }
    return { checkpoint: value("checkpoint"), strict: box.querySelector("[name=strict]").checked, fixture: value("fixture"), fixture_keys: keys };
  }

  fieldControl(f) {
    const path = f.path || `init.kwargs.${f.name}`;
    const type = (f.type || f.annotation || "str").toLowerCase();
    const value = f.value !== undefined ? f.value : f.default;
    let input;
    if (type === "bool" || typeof value === "boolean") {
      input = el("select", { name: f.name, "data-path": path, "data-type": "bool" },
        el("option", { value: "true", selected: value === true }, "True"), el("option", { value: "false", selected: value !== true }, "False"));
    } else if (f.choices && f.choices.length) {
      input = el("select", { name: f.name, "data-path": path, "data-type": type }, f.choices.map((c) => el("option", { value: String(c), selected: c === value }, typeof c === "string" ? c : JSON.stringify(c))));
      input._choices = f.choices; // saved as the choice itself (a Literal's 1 stays a number)
    } else {
      input = el("input", {
        name: f.name, "data-path": path, "data-type": type,
        value: value === undefined || value === null ? "" : typeof value === "object" ? JSON.stringify(value) : String(value),
        inputmode: type === "int" || type === "float" ? "decimal" : undefined,
        placeholder: f.required ? "required" : "",
      });
      if (f.required && (value === undefined || value === null)) input.setAttribute("aria-invalid", "true");
    }
    const label = el("label", { class: "field", "data-field": f.name },
      el("span", {}, f.name, f.annotation ? el("code", { class: "muted" }, `  ${f.annotation}`) : null),
      input,
      f.help ? el("small", {}, f.help) : null,
      el("div", { class: "field-error", hidden: true }));
    return label;
  }

  // The recipe to save: the server's recipe with the form's inputs and fields in it.
  collect() {
    const recipe = structuredClone(this.data.recipe || {});
    const args = [];
    const kwargs = {};
    const problems = [];
    const saved = this.savedFiles(problems);
    const fromFixture = !!(saved && saved.fixture);
    this.root.querySelectorAll(".input-card").forEach((card, i) => {
      if (fromFixture) return; // the fixture gives the inputs
      const inp = card._inp || {};
      const shapeInput = card.querySelector("[name=shape]");
      const shape = parseShape(shapeInput.value);
      if (shape.some((x) => typeof x !== "number")) problems.push({ path: shapeInput.dataset.path, message: "every dimension must be a whole number" });
      else if (!shape.length && card.dataset.needed) problems.push({ path: shapeInput.dataset.path, message: `enter the shape of ${inp.name || "this input"} (whole numbers, e.g. 2, 3)` });
      const genKind = card.querySelector("[name=generator]").value;
      const genValue = genKind === "full" ? card.querySelector("[name=generator-value]").value.trim() : "";
      const generator = { ...(inp.generator && inp.generator.kind === genKind ? inp.generator : {}), kind: genKind };
      if (genValue !== "") generator.value = Number.isNaN(Number(genValue)) ? genValue : Number(genValue);
      else if (genKind === "full") delete generator.value;
      const desc = {
        ...(inp.description || {}),
        kind: inp.kind || "tensor",
        shape,
        dtype: card.querySelector("[name=dtype]").value,
        requires_grad: false,
        generator,
      };
      if (inp.kwarg || (inp.path && inp.path.includes("kwargs"))) kwargs[inp.name] = desc;
      else args.push(desc);
    });
    const savedFixture = recipe.inputs && recipe.inputs.fixture;
    if (fromFixture) {
      // Literal kwargs saved beside a fixture stay; the cards' tensors do not join it.
      const prior = savedFixture && recipe.inputs.kwargs ? recipe.inputs.kwargs : null;
      recipe.inputs = { fixture: saved.fixture };
      if (Object.keys(saved.fixture_keys).length) recipe.inputs.fixture_keys = saved.fixture_keys;
      if (prior && Object.keys(prior).length) recipe.inputs.kwargs = prior;
    } else if (this.data.inputs && this.data.inputs.length) {
      const base = savedFixture ? { kwargs: recipe.inputs.kwargs || {} } : recipe.inputs || {};
      recipe.inputs = { ...base, args, kwargs: { ...(base.kwargs || {}), ...kwargs } };
      delete recipe.inputs.factory;
    } else if (saved && savedFixture) {
      recipe.inputs = { args: [], kwargs: recipe.inputs.kwargs || {} };
    }
    if (saved) {
      const init = { ...(recipe.init || { args: [], kwargs: {} }) };
      delete init.checkpoint;
      delete init.strict;
      if (saved.checkpoint) {
        init.checkpoint = saved.checkpoint;
        init.strict = saved.strict;
      }
      recipe.init = init;
    }
    const fields = this.root.querySelectorAll("[data-field] [data-path]");
    if (fields.length) {
      recipe.init = recipe.init || { args: [], kwargs: {} };
      recipe.init.kwargs = { ...(recipe.init.kwargs || {}) };
      fields.forEach((input) => {
        const name = input.name;
        const raw = input.value.trim();
        const type = input.dataset.type;
        let v = raw;
        if (input._choices) v = input._choices[input.selectedIndex];
        else if (type === "bool") v = raw === "true";
        else if (type === "int") v = /^-?\d+$/.test(raw) ? Number(raw) : raw;
        else if (type === "float") v = raw !== "" && !Number.isNaN(Number(raw)) ? Number(raw) : raw;
        else if (raw === "") return;
        else if (/^[[{]/.test(raw)) {
          try {
            v = JSON.parse(raw);
          } catch (e) {
            v = raw;
          }
        }
        if (raw === "" && type !== "bool") return;
        recipe.init.kwargs[name] = v;
      });
    }
    return { recipe, problems };
  }

  showErrors(errors) {
    const list = this.root.querySelector("#setup-errors");
    clear(list);
    list.hidden = !errors.length;
    this.root.querySelectorAll(".field-error").forEach((n) => {
      n.hidden = true;
      n.textContent = "";
    });
    this.root.querySelectorAll("[data-path][aria-invalid]").forEach((n) => n.removeAttribute("aria-invalid"));
    for (const e of errors) {
      list.append(el("li", {}, e.path ? el("code", {}, e.path) : null, e.path ? ": " : "", e.message));
      const control = this.controlFor(e.path || "");
      if (control) {
        control.setAttribute("aria-invalid", "true");
        const holder = control.closest(".input-card, .field");
        const slot = holder && holder.querySelector(".field-error");
        if (slot) {
          slot.hidden = false;
          slot.textContent = (slot.textContent ? slot.textContent + " " : "") + e.message;
        }
      }
    }
  }

  controlFor(path) {
    if (!path) return null;
    const norm = (p) => String(p).replace(/\[(\w+)\]/g, ".$1").replace(/^\./, "");
    const want = norm(path);
    let best = null;
    let bestLen = -1;
    this.root.querySelectorAll("[data-path]").forEach((n) => {
      if (n.classList.contains("input-card")) return;
      const p = norm(n.dataset.path);
      if ((want === p || want.startsWith(p + ".") || p.startsWith(want + ".")) && p.length > bestLen) {
        best = n;
        bestLen = p.length;
      }
    });
    return best;
  }

  setStatus(text) {
    this.root.querySelector("#setup-status").textContent = text;
  }

  async save() {
    const nameInput = this.root.querySelector("#setup-name");
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
    let res;
    try {
      res = await this.api.saveProfile(name, recipe);
    } catch (err) {
      res = err.body && err.body.errors ? err.body : { ok: false, errors: [{ path: "", message: err.message || String(err) }] };
    }
    if (!res || !res.ok) {
      this.setStatus("");
      this.showErrors((res && res.errors) || [{ path: "", message: "the profile was not saved" }]);
      return false;
    }
    this.showErrors([]);
    this.data.profile = name;
    this.data.needs = [];
    this.root.querySelector("#setup-needs").hidden = true; // saved: what was needed is given
    this.setStatus("Saved. Starting capture…");
    return this.capture(name);
  }

  async capture(name = this.profile) {
    try {
      const res = await this.api.startCapture(name);
      if (res && res.started === false) throw new Error(res.message || "capture was not started");
      this.setStatus("Capture started.");
      this.onCaptureStarted(name);
      return true;
    } catch (err) {
      this.setStatus(`Could not start the capture: ${err.message || err}`);
      return false;
    }
  }
}

// "2, 3", "2 3", "2x3", "[2, 3]" → [2, 3]; anything that is not a whole number stays text.
function parseShape(text) {
  const t = String(text).trim().replace(/^[[(]|[\])]$/g, "");
  return t === "" ? [] : t.split(/[\s,x×]+/).filter(Boolean).map((d) => (/^\d+$/.test(d) ? Number(d) : d));
}

// The symbol's name made a profile name by the recipe's own rule (capture.recipe.profile_name,
// sent in the schema): each character a name cannot hold becomes "_", cut to the length.
function suggestName(recipe, schema) {
  const symbol = ((recipe && recipe.model) || "").split(":").pop();
  if (!symbol || !schema.profile_name_invalid) return "profile";
  return symbol.replace(new RegExp(schema.profile_name_invalid, "g"), "_").slice(0, schema.profile_name_max || undefined) || "profile";
}
