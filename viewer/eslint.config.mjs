// ESLint over the browser app (viewer/static): the recommended rules, ES modules in a
// browser page and its layout module worker, and the complexity and size limits Python has.
// Run by the structure report (python -m tools.structure; tests/foundation/test_structure.py).
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["static/vendor/**", "node_modules/**"] },
  js.configs.recommended,
  {
    files: ["static/**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.browser, ...globals.worker },
    },
    rules: {
      // `const { child, ...rest } = it` drops `child` from a copy: not an unused name.
      "no-unused-vars": ["error", { ignoreRestSiblings: true }],
      // The limits Python has (ruff C901 at 15; files under 900 lines): a function over 15
      // says why it is one function (`// eslint-disable-next-line complexity -- why`), as
      // a Python one says `noqa: C901`; a new one fails. The vendored ELK is not ours.
      complexity: ["error", 15],
      "max-lines": ["error", { max: 900 }],
      "max-depth": ["error", 5],
    },
  },
];
