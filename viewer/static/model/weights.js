// Where a graph's parameters came from, in words (spec, Linen: "This is freshly
// initialized state, not trained weights"). The worker records meta.state (a label) and
// meta.state_note (its own sentence); the recipe says the seed and any init factory.
// A Torch checkpoint (meta.state "checkpoint") also records meta.checkpoint (its
// workspace path) and, loaded with strict = false, meta.checkpoint_missing/_unexpected.

/** @type {Record<string, string>} */
const FACTORY_DETAIL = {
  factory_variables: "bound with model.bind(variables)",
  factory_state: "the state of the module it built",
  callable_state: "the state of the NNX modules its callable carries",
};

// What describeState reads to word a state: the recorded label, the worker's meta, the
// recipe and its init factory (null: none).
/** @typedef {{label: string, meta: any, recipe: any, factory: string | null}} StateFacts */

// A checkpoint's words (meta.state "checkpoint"): its file and, loaded with strict = false,
// how many keys did not match (the worker's counts when it cut its lists short) and which.
/**
 * @param {StateFacts} s
 * @returns {{headline: string, keys?: {missing: string[], unexpected: string[]}}}
 */
function checkpointWords({ meta }) {
  const file = typeof meta.checkpoint === "string" && meta.checkpoint ? meta.checkpoint : "a checkpoint";
  const missing = Array.isArray(meta.checkpoint_missing) ? meta.checkpoint_missing.map(String) : [];
  const unexpected = Array.isArray(meta.checkpoint_unexpected) ? meta.checkpoint_unexpected.map(String) : [];
  const [nMissing, nUnexpected] = checkpointCounts(meta, missing, unexpected);
  if (meta.checkpoint_strict !== false || !(nMissing || nUnexpected)) return { headline: `Trained weights from ${file}, not TensorViz's initialization.` };
  const parts = [];
  if (nMissing) parts.push(`${nMissing} ${nMissing === 1 ? "key" : "keys"} missing (kept at initialization)`);
  if (nUnexpected) parts.push(`${nUnexpected} unexpected ${nUnexpected === 1 ? "key" : "keys"} ignored`);
  return { headline: `Trained weights from ${file} (strict = false: ${parts.join("; ")}).`, keys: { missing, unexpected } };
}

// How many keys a checkpoint load did not match: the worker's counts (it cuts long lists
// short), else the lists' lengths.
/**
 * @param {any} meta
 * @param {string[]} missing
 * @param {string[]} unexpected
 * @returns {[number, number]}
 */
function checkpointCounts(meta, missing, unexpected) {
  const counts = meta.checkpoint_counts && typeof meta.checkpoint_counts === "object" ? meta.checkpoint_counts : {};
  return [Number.isInteger(counts.missing) ? counts.missing : missing.length,
    Number.isInteger(counts.unexpected) ? counts.unexpected : unexpected.length];
}

// Each state's origin and headline, in order of precedence: the first whose `when` holds
// words it. Abstract state has no values at all: a Torch abstract capture (meta.state
// "abstract", or "checkpoint_checked": a checkpoint's names and shapes checked, nothing
// loaded) and a JAX state built by nnx.eval_shape / jax.eval_shape (meta.state_abstract).
/** @type {{when: (s: StateFacts) => boolean, origin: string, words: (s: StateFacts) => string | {headline: string, keys?: {missing: string[], unexpected: string[]}}}[]} */
const STATES = [
  { when: (s) => s.label === "abstract", origin: "abstract",
    words: () => "Abstract: no weights. The model was built on fake tensors: shapes, dtypes and strides only, nothing was computed." },
  { when: (s) => s.label === "checkpoint_checked", origin: "abstract", words: ({ meta }) => {
    const file = typeof meta.checkpoint === "string" && meta.checkpoint ? meta.checkpoint : "the checkpoint";
    return `Abstract: no weights. The names and shapes of ${file} were checked against the model; nothing was loaded or computed.`;
  } },
  { when: (s) => s.meta.state_abstract === true, origin: "abstract", words: ({ factory }) => {
    const which = factory ? `the workspace factory ${factory}` : "its own code";
    return `Abstract: no weights. The state built by ${which} holds shapes and dtypes only (eval_shape): nothing was computed.`;
  } },
  { when: (s) => s.label === "checkpoint", origin: "checkpoint", words: checkpointWords },
  { when: (s) => s.label === "module_instance", origin: "carried",
    words: () => "Weights: the state of the module-level instance, as importing its module left it." },
  { when: (s) => s.label === "fresh_init", origin: "fresh", words: ({ recipe }) => {
    const seed = Number.isInteger(recipe.seed) ? `seed ${recipe.seed}` : "the profile seed";
    return `Freshly initialized parameters (${seed}), not trained weights.`;
  } },
  { when: (s) => s.label === "constructed", origin: "fresh",
    words: () => "Freshly initialized parameters (built by the constructor from the literal init), not trained weights." },
  { when: (s) => s.label in FACTORY_DETAIL && (!!s.factory || s.label !== "callable_state"), origin: "factory", words: ({ label, factory }) => {
    const which = factory ? `the workspace factory ${factory}` : "the workspace factory";
    return `Weights from ${which} (${FACTORY_DETAIL[label]}), not TensorViz's initialization.`;
  } },
  { when: (s) => s.label === "callable_state", origin: "carried",
    words: () => "Weights: the state of the NNX modules the function itself carries (as its own code built them)." },
];

// {label, origin: "fresh"|"factory"|"carried"|"checkpoint"|"abstract"|"other", headline, note, keys?}
// or null when the capture records no state (plain functions, older captures). `keys`
// ({missing, unexpected}) lists what a non-strict checkpoint load did not match.
/** @param {any} capture  `api/capture` */
export function describeState(capture) {
  const meta = (capture && capture.meta) || {};
  const label = typeof meta.state === "string" ? meta.state : "";
  if (!label) return null;
  const recipe = (capture && capture.recipe) || {};
  const note = typeof meta.state_note === "string" && meta.state_note ? sentence(meta.state_note) : null;
  /** @type {StateFacts} */
  const facts = { label, meta, recipe, factory: initFactory(recipe) };
  const state = STATES.find((st) => st.when(facts));
  if (!state) return { label, origin: "other", headline: `Parameter state: ${label.replace(/_/g, " ")}.`, note };
  const said = state.words(facts);
  const { headline, keys } = typeof said === "string" ? { headline: said, keys: undefined } : said;
  return keys ? { label, origin: state.origin, headline, note, keys } : { label, origin: state.origin, headline, note };
}

// The workspace factory the recipe's init names, or null.
/**
 * @param {any} recipe
 * @returns {string | null}
 */
function initFactory(recipe) {
  const init = recipe.init && typeof recipe.init === "object" ? recipe.init : {};
  return typeof init.factory === "string" && init.factory ? init.factory : null;
}

/** @param {string} text */
function sentence(text) {
  const t = text.trim();
  return t.charAt(0).toUpperCase() + t.slice(1) + (/[.!?]$/.test(t) ? "" : ".");
}
