// The setup form's types (panels/setup.js), as types only (no code): what `GET api/setup`
// sends (the inputs, setup fields, configuration classes, factories and the recipe's own
// schema), the recipe the form saves and the controls it reads back. Moved out of setup.js.

export {};

/**
 * A value the recipe holds or a field offers (a default, a saved value, a choice, a
 * literal read back): arbitrary JSON (capture.recipe's spec), hence `any`.
 * @typedef {any} Json
 */

/**
 * The generator of an array input (the spec's `{kind: "full", value: 1}`); `high` the
 * bound of integers drawn below it (null: a vocabulary the code does not tell).
 * @typedef {{kind: string, value?: number | string, low?: number, high?: number | null}} Generator
 */

/**
 * Token ids (discovery's `token`): why, the bound and where it comes from (`high_from`,
 * `config.vocab_size`), and the form control whose value bounds the ids (`high_path`).
 * @typedef {{reason?: string | null, high?: number | null, high_from?: string | null, high_path?: string | null}} TokenInfo
 */

/**
 * An input of the model (`inputs[]`, viewer/API.md "api/setup"): a tensor (shape, dtype,
 * generator) or a value in the shorthand's VALUE grammar (`kind: "value"`, `text`). A
 * non-number entry of `shape` is an unknown dimension (its name, or null); `needed` says
 * why an optional input is filled; `description`: a saved description the form's values
 * are written over.
 * @typedef {object} SetupInput
 * @property {string | null} [name]
 * @property {string} [path]  where it lives in the recipe ("inputs.args[0]", the default, "inputs.kwargs.x")
 * @property {string} [kind]  "tensor" | "value"
 * @property {(number | string | null)[]} [shape]
 * @property {(string | number)[]} [unknown]  more unknown dimensions, by name
 * @property {string} [dtype]
 * @property {Generator} [generator]
 * @property {string | null} [annotation]
 * @property {boolean} [kwarg]
 * @property {TokenInfo} [token]
 * @property {string} [text]
 * @property {string} [needed]
 * @property {Record<string, Json>} [description]
 */

/**
 * A configuration class discovery read for a field (`config`): drawn as a nested group of
 * its fields, saved as a call of `target`; `complete: false` when a base class it could
 * not read may add fields.
 * @typedef {{name: string, target: string, where?: string, style?: string | null, complete?: boolean, fields: SetupField[]}} ConfigClass
 */

/**
 * A setup field (`fields[]`): a constructor parameter, a Linen field, a JAX function's
 * static argument. `type`: "int" | "float" | "bool" | "str" | "value" (text in the VALUE
 * grammar, `text` prefilled, `example` its placeholder) or an annotation's text;
 * `default_text`: a default that is no literal, shown and left unset.
 * @typedef {object} SetupField
 * @property {string} name
 * @property {string} [path]  default "init.kwargs.NAME"
 * @property {string} [type]
 * @property {string | null} [annotation]
 * @property {Json} [default]
 * @property {string} [default_text]
 * @property {Json} [value]
 * @property {boolean} [required]
 * @property {Json[]} [choices]
 * @property {string} [help]
 * @property {ConfigClass} [config]
 * @property {string} [text]
 * @property {string} [example]
 * @property {Json} [suggested]  what the command line would suggest (a small size, a required field), the starting value when nothing is saved
 */

/** @typedef {{value?: string | null, placeholder?: string, contract?: string}} Factory  an init or inputs factory offered */
/** @typedef {{value: string, default: string, choices: {value: string, label: string}[]}} EvidenceChoice  Torch's evidence */
/** @typedef {{lines?: string[], help?: string}} Steps  the steps after construction, one STEP line each */
/** @typedef {{value?: string, placeholder?: string, help?: string}} MeshText  the recipe's mesh as the `--mesh` text */
/** @typedef {{value: string, default: string, help?: string, choices: {value: string, label: string}[]}} DeviceChoice  the recipe's device */
/** @typedef {string | {path?: string, message?: string}} Need  what must be filled before a capture */
/** @typedef {{frameworks?: string[], checkpoint?: string[], fixture?: string[]}} SavedFilesSpec  who loads saved files, and their suffixes */

/**
 * What the form may offer (viewer/server/handlers.py form_schema): the recipe's dtype and
 * generator lists, the generators given a fill value and a bound, the profile-name rule.
 * @typedef {object} FormSchema
 * @property {string[]} [dtypes]
 * @property {string[]} [generators]
 * @property {string | null} [fill_generator]
 * @property {string | null} [bounded_generator]
 * @property {string} [default_dtype]
 * @property {string} [profile_name]  the pattern a name matches
 * @property {string} [profile_name_invalid]  the characters a suggested name turns into "_"
 * @property {number} [profile_name_max]
 * @property {string} [profile_name_rule]  the rule in words
 * @property {SavedFilesSpec} [saved_files]
 * @property {string} [default_framework]  a recipe's framework when it names none
 */

/**
 * The recipe's init and inputs as the form writes them (the spec's keys); the rest of a
 * recipe is kept as saved.
 * @typedef {{args?: Json[], kwargs?: Record<string, Json>, factory?: string, checkpoint?: string, strict?: boolean}} RecipeInit
 * @typedef {{args?: Json[], kwargs?: Record<string, Json>, factory?: string, fixture?: string,
 *   fixture_keys?: Record<string, string>}} RecipeInputs
 */

/**
 * A profile's recipe (capture.recipe's spec): the keys the form reads and writes; the
 * others (and any the fields' paths reach, setPath) are kept as saved.
 * @typedef {object} Recipe
 * @property {string} [model]  "file.py:Symbol"
 * @property {string} [framework]
 * @property {RecipeInit} [init]
 * @property {RecipeInputs} [inputs]
 * @property {string[]} [steps_text]
 * @property {string[]} [before_text]  the calls before construction, one a line (read on the server)
 * @property {Json} [mesh]  saved as a table; the form writes the `--mesh` text
 * @property {string} [evidence]
 * @property {string} [device]
 */

/**
 * `api/setup`: the setup form's content (viewer/API.md; every key but `recipe` optional,
 * `schema` added by the server to every answer).
 * @typedef {object} SetupData
 * @property {string | null} [profile]
 * @property {Recipe} [recipe]
 * @property {SetupField[]} [fields]
 * @property {SetupInput[]} [inputs]
 * @property {Need[]} [needs]
 * @property {{init?: Factory | null, inputs?: Factory | null}} [factories]
 * @property {EvidenceChoice | null} [evidence]
 * @property {Steps | null} [steps]
 * @property {Steps | null} [before]  calls before construction (library state), one a line
 * @property {MeshText | null} [mesh]
 * @property {DeviceChoice | null} [device]
 * @property {{qualname?: string, kind?: string, framework?: string}} [symbol]  the symbol set up
 * @property {FormSchema} [schema]
 */

/** @typedef {{path?: string, message: string}} Problem  a validation error: the control's path, what is wrong */
/** @typedef {{ok?: boolean, errors?: Problem[]}} SaveAnswer  `api/profile`'s answer */
/** @typedef {{set: false} | {set: true, value: Json}} ReadBack  a control read back: unset, or its value */
/** @typedef {(problems: Problem[]) => ReadBack} Reader  reads a control back, saying what is wrong in `problems` */

/**
 * An input's card (inputCard): `_inp` the input it was drawn for, `dataset.kind` "tensor"
 * or "value", `dataset.needed` set while its shape is needed.
 * @typedef {HTMLElement & {_inp?: SetupInput}} InputCard
 */

/** @typedef {HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement} ValueControl  a control with a value */

/**
 * A field's control (fieldControl): `_choices`, a drop-down's values by option index
 * (undefined: left unset).
 * @typedef {(HTMLInputElement | HTMLSelectElement) & {_choices?: Json[]}} FieldInput
 */
