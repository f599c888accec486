#!/usr/bin/env node
// Launches `tensorviz lsp` exactly as the extension does (server-options.js, plus the
// `--stdio` vscode-languageclient appends) and talks to it with vscode-jsonrpc, the
// library vscode-languageclient is built on: initialize (with VS Code-like client
// capabilities and the extension's initializationOptions), initialized, didOpen, a
// codeLens request, shutdown, exit. Prints one JSON object with what it saw.
//
//   node test/harness.js --workspace DIR --file model.py [--settings JSON]
"use strict";

const cp = require("child_process");
const fs = require("fs");
const path = require("path");
const { pathToFileURL } = require("url");
const rpc = require("vscode-jsonrpc/node");
const { serverExecutable, serverSettings, launchArgs } = require("../server-options");

function parseArgs(argv) {
  const out = { settings: {} };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--workspace") out.workspace = argv[++i];
    else if (a === "--file") out.file = argv[++i];
    else if (a === "--settings") out.settings = JSON.parse(argv[++i]);
    else if (a === "--self-test") out.selfTest = true;
    else if (a === "--timeout") out.timeout = Number(argv[++i]);
  }
  return out;
}

function capabilities() {
  // The parts of VS Code's client capabilities that matter to this server.
  return {
    workspace: {
      configuration: true,
      workspaceFolders: true,
      didChangeWatchedFiles: { dynamicRegistration: true, relativePatternSupport: true },
      executeCommand: { dynamicRegistration: true },
      codeLens: { refreshSupport: true },
    },
    textDocument: {
      synchronization: { dynamicRegistration: true, didSave: true },
      codeLens: { dynamicRegistration: true },
      codeAction: { dynamicRegistration: true, codeActionLiteralSupport: { codeActionKind: { valueSet: ["", "quickfix", "source"] } } },
      publishDiagnostics: { relatedInformation: true },
    },
    window: { workDoneProgress: true, showMessage: {}, showDocument: { support: true } },
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.selfTest) {
    const exe = serverExecutable({}, {});
    // Every setting the extension declares reaches the server (captureEnv included).
    const forwarded = serverSettings({ python: "/p", captureTimeout: 5, captureEnv: { JAX_ENABLE_X64: "1" }, junk: 1 });
    const ok = exe.command === "tensorviz" && JSON.stringify(launchArgs(exe)) === JSON.stringify(["lsp", "--stdio"])
      && JSON.stringify(forwarded) === JSON.stringify({ python: "/p", captureTimeout: 5, captureEnv: { JAX_ENABLE_X64: "1" } });
    console.log(JSON.stringify({ selfTest: ok, command: [exe.command, ...launchArgs(exe)] }));
    process.exit(ok ? 0 : 1);
  }
  const workspace = path.resolve(args.workspace);
  const file = path.join(workspace, args.file);
  const exe = serverExecutable(args.settings, process.env);
  const argv = launchArgs(exe);
  const server = cp.spawn(exe.command, argv, { cwd: workspace, env: exe.options.env, stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  server.stderr.on("data", (d) => (stderr += d.toString()));
  const spawnError = new Promise((_, reject) => server.on("error", reject));

  const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(server.stdout), new rpc.StreamMessageWriter(server.stdin));
  const seen = { command: [exe.command, ...argv], logs: [], registrations: [], configurationRequests: 0 };
  conn.onNotification("window/logMessage", (p) => seen.logs.push(p.message));
  conn.onNotification("window/showMessage", (p) => seen.logs.push(p.message));
  conn.onNotification("textDocument/publishDiagnostics", () => {});
  conn.onNotification("$/progress", () => {});
  conn.onRequest("workspace/configuration", (p) => {
    seen.configurationRequests++;
    return p.items.map(() => serverSettings(args.settings));
  });
  conn.onRequest("client/registerCapability", (p) => {
    seen.registrations.push(...p.registrations.map((r) => r.method));
    return null;
  });
  conn.onRequest("window/workDoneProgress/create", () => null);
  conn.onRequest("workspace/codeLens/refresh", () => null);
  conn.listen();

  // The timer is cleared once the run settles: a pending one keeps Node alive to its end.
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("timed out; stderr:\n" + stderr)), (args.timeout || 60) * 1000);
  });
  const run = (async () => {
    const rootUri = pathToFileURL(workspace).href;
    const init = await conn.sendRequest("initialize", {
      processId: process.pid,
      clientInfo: { name: "Visual Studio Code (harness)", version: "1.82.0" },
      rootUri,
      workspaceFolders: [{ uri: rootUri, name: path.basename(workspace) }],
      capabilities: capabilities(),
      initializationOptions: { tensorviz: serverSettings(args.settings) },
    });
    seen.serverInfo = init.serverInfo;
    seen.commands = (init.capabilities.executeCommandProvider || {}).commands || [];
    seen.codeLensProvider = !!init.capabilities.codeLensProvider;
    await conn.sendNotification("initialized", {});
    const uri = pathToFileURL(file).href;
    await conn.sendNotification("textDocument/didOpen", {
      textDocument: { uri, languageId: "python", version: 1, text: fs.readFileSync(file, "utf8") },
    });
    seen.lenses = await conn.sendRequest("textDocument/codeLens", { textDocument: { uri } });
    await conn.sendRequest("shutdown");
    await conn.sendNotification("exit");
    const code = await new Promise((resolve) => server.on("exit", (c) => resolve(c)));
    seen.exitCode = code;
  })();
  try {
    await Promise.race([run, timeout, spawnError]);
  } finally {
    clearTimeout(timer);
  }
  conn.dispose();
  console.log(JSON.stringify(seen));
}

main().catch((err) => {
  console.error(String(err && err.stack || err));
  process.exit(1);
});
