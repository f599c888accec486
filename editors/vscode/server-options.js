// How the extension starts `tensorviz lsp`. Plain Node (no `vscode` import) so that
// test/harness.js launches the server exactly the way the extension does.
"use strict";

const DEFAULT_COMMAND = ["tensorviz", "lsp"];

/**
 * @param {{ server?: { command?: string[] } }} settings  the `tensorviz` configuration section
 * @param {NodeJS.ProcessEnv} env
 * @returns {{ command: string, args: string[], options: { env: NodeJS.ProcessEnv } }}
 */
function serverExecutable(settings, env) {
  let argv = settings && settings.server && settings.server.command;
  if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === "string" && a)) {
    argv = DEFAULT_COMMAND;
  }
  // vscode-languageclient appends `--stdio` itself (TransportKind.stdio); `tensorviz lsp`
  // accepts it. test/harness.js does the same (see launchArgs).
  return { command: argv[0], args: argv.slice(1), options: { env: { ...env, PYTHONUNBUFFERED: "1" } } };
}

/** The settings the server reads (initializationOptions and workspace/configuration). */
function serverSettings(settings) {
  const out = {};
  for (const key of ["python", "captureTimeout", "captureEnv", "lensDebounceMs", "installCommand"]) {
    if (settings && settings[key] !== undefined && settings[key] !== null) out[key] = settings[key];
  }
  return out;
}

/** The argv vscode-languageclient spawns for an Executable with TransportKind.stdio. */
function launchArgs(exe) {
  return [...exe.args, "--stdio"];
}

module.exports = { DEFAULT_COMMAND, serverExecutable, serverSettings, launchArgs };
