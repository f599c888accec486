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

// Abstract state has no values at all: a Torch abstract capture (meta.state "abstract",
// or "checkpoint_checked": a checkpoint's names and shapes checked, nothing loaded) and a
// JAX state built by nnx.eval_shape / jax.eval_shape (meta.state_abstract).
// {label, origin: "fresh"|"factory"|"carried"|"checkpoint"|"abstract"|"other", headline, note, keys?}
// or null when the capture records no state (plain functions, older captures). `keys`
// ({missing, unexpected}) lists what a non-strict checkpoint load did not match.
/** @param {any} capture  `api/capture` */
// eslint-disable-next-line complexity -- one headline per recorded state label, in order of precedence
export function describeState(capture) {
  const meta = (capture && capture.meta) || {};
  const label = typeof meta.state === "string" ? meta.state : "";
  if (!label) return null;
  const recipe = (capture && capture.recipe) || {};
  const init = recipe.init && typeof recipe.init === "object" ? recipe.init : {};
  const factory = typeof init.factory === "string" && init.factory ? init.factory : null;
  const note = typeof meta.state_note === "string" && meta.state_note ? sentence(meta.state_note) : null;
  let origin = "other";
  let headline;
  let keys;
  if (label === "abstract") {
    origin = "abstract";
    headline = "Abstract: no weights. The model was built on fake tensors: shapes, dtypes and strides only, nothing was computed.";
  } else if (label === "checkpoint_checked") {
    origin = "abstract";
    const file = typeof meta.checkpoint === "string" && meta.checkpoint ? meta.checkpoint : "the checkpoint";
    headline = `Abstract: no weights. The names and shapes of ${file} were checked against the model; nothing was loaded or computed.`;
  } else if (meta.state_abstract === true) {
    origin = "abstract";
    const which = factory ? `the workspace factory ${factory}` : "its own code";
    headline = `Abstract: no weights. The state built by ${which} holds shapes and dtypes only (eval_shape): nothing was computed.`;
  } else if (label === "checkpoint") {
    origin = "checkpoint";
    const file = typeof meta.checkpoint === "string" && meta.checkpoint ? meta.checkpoint : "a checkpoint";
    const missing = Array.isArray(meta.checkpoint_missing) ? meta.checkpoint_missing.map(String) : [];
    const unexpected = Array.isArray(meta.checkpoint_unexpected) ? meta.checkpoint_unexpected.map(String) : [];
    const counts = meta.checkpoint_counts && typeof meta.checkpoint_counts === "object" ? meta.checkpoint_counts : {};
    const nMissing = Number.isInteger(counts.missing) ? counts.missing : missing.length;
    const nUnexpected = Number.isInteger(counts.unexpected) ? counts.unexpected : unexpected.length;
    headline = `Trained weights from ${file}, not TensorViz's initialization.`;
    if (meta.checkpoint_strict === false && (nMissing || nUnexpected)) {
      const parts = [];
      if (nMissing) parts.push(`${nMissing} ${nMissing === 1 ? "key" : "keys"} missing (kept at initialization)`);
      if (nUnexpected) parts.push(`${nUnexpected} unexpected ${nUnexpected === 1 ? "key" : "keys"} ignored`);
      headline = `Trained weights from ${file} (strict = false: ${parts.join("; ")}).`;
      keys = { missing, unexpected };
    }
  } else if (label === "module_instance") {
    origin = "carried";
    headline = "Weights: the state of the module-level instance, as importing its module left it.";
  } else if (label === "fresh_init") {
    origin = "fresh";
    const seed = Number.isInteger(recipe.seed) ? `seed ${recipe.seed}` : "the profile seed";
    headline = `Freshly initialized parameters (${seed}), not trained weights.`;
  } else if (label === "constructed") {
    origin = "fresh";
    headline = "Freshly initialized parameters (built by the constructor from the literal init), not trained weights.";
  } else if (label in FACTORY_DETAIL && (factory || label !== "callable_state")) {
    origin = "factory";
    const which = factory ? `the workspace factory ${factory}` : "the workspace factory";
    headline = `Weights from ${which} (${FACTORY_DETAIL[label]}), not TensorViz's initialization.`;
  } else if (label === "callable_state") {
    origin = "carried";
    headline = "Weights: the state of the NNX modules the function itself carries (as its own code built them).";
  } else {
    headline = `Parameter state: ${label.replace(/_/g, " ")}.`;
  }
  return keys ? { label, origin, headline, note, keys } : { label, origin, headline, note };
}

/** @param {string} text */
function sentence(text) {
  const t = text.trim();
  return t.charAt(0).toUpperCase() + t.slice(1) + (/[.!?]$/.test(t) ? "" : ".");
}
