// TensorViz for VS Code: a thin client for `tensorviz lsp`. Everything (code lenses,
// commands, trust prompts, progress, diagnostics, opening the graph viewer) is the
// language server's; this file only starts it with the user's settings.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");
const { serverExecutable, serverSettings } = require("./server-options");

/** @type {LanguageClient | undefined} */
let client;

function settings() {
  const cfg = vscode.workspace.getConfiguration("tensorviz");
  return {
    server: { command: cfg.get("server.command") },
    python: cfg.get("python"),
    captureTimeout: cfg.get("captureTimeout"),
    captureEnv: cfg.get("captureEnv"),
    lensDebounceMs: cfg.get("lensDebounceMs"),
    installCommand: cfg.get("installCommand"),
  };
}

function createClient(context) {
  const exe = serverExecutable(settings(), process.env);
  const serverOptions = { ...exe, transport: TransportKind.stdio };
  const watcher = vscode.workspace.createFileSystemWatcher("**/{*.py,.tensorviz/recipes.toml}");
  context.subscriptions.push(watcher);
  const clientOptions = {
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "file", pattern: "**/.tensorviz/recipes.toml" },
    ],
    synchronize: { fileEvents: watcher, configurationSection: "tensorviz" },
    initializationOptions: { tensorviz: serverSettings(settings()) },
    outputChannelName: "TensorViz",
  };
  return new LanguageClient("tensorviz", "TensorViz", serverOptions, clientOptions);
}

async function activate(context) {
  client = createClient(context);
  context.subscriptions.push(
    vscode.commands.registerCommand("tensorviz.restartServer", async () => {
      if (client) await client.stop();
      client = createClient(context);
      await client.start();
    }),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (e.affectsConfiguration("tensorviz.server.command")) {
        await vscode.commands.executeCommand("tensorviz.restartServer");
      }
    }),
  );
  await client.start();
}

async function deactivate() {
  if (client) await client.stop();
}

module.exports = { activate, deactivate };
