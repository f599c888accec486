// ESLint over the browser app (viewer/static): the recommended rules, ES modules in a
// browser page and its layout module worker. Run by the structure report (python -m
// tools.structure; tests/foundation/test_structure.py).
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
    // `const { child, ...rest } = it` drops `child` from a copy: not an unused name.
    rules: { "no-unused-vars": ["error", { ignoreRestSiblings: true }] },
  },
];
