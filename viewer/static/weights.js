// Where a JAX graph's parameters came from, in words (spec, Linen: "This is freshly
// initialized state, not trained weights"). The worker records meta.state (a label) and
// meta.state_note (its own sentence); the recipe says the seed and any init factory.

const FACTORY_DETAIL = {
  factory_variables: "bound with model.bind(variables)",
  factory_state: "the state of the module it built",
  callable_state: "the state of the NNX modules its callable carries",
};

// {label, origin: "fresh"|"factory"|"carried"|"other", headline, note} or null when the
// capture records no state (Torch captures, plain functions without NNX state).
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
  if (label === "fresh_init") {
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
  return { label, origin, headline, note };
}

function sentence(text) {
  const t = text.trim();
  return t.charAt(0).toUpperCase() + t.slice(1) + (/[.!?]$/.test(t) ? "" : ".");
}
