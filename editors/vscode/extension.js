// TensorViz for VS Code: a thin client for `tensorviz lsp`. Everything (code lenses,
// commands, trust prompts, progress, diagnostics, the graph viewer's server) is the
// language server's; this file starts it with the user's settings and shows the viewer
// in an editor tab (viewer-panel.js) unless the user asks for the browser.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");
const { serverExecutable, serverSettings } = require("./server-options");
const { ViewerPanels } = require("./viewer-panel");

/** @type {LanguageClient | undefined} */
let client;
/** @type {ViewerPanels | undefined} */
let panels;

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

function createClient(watcher) {
  const exe = serverExecutable(settings(), process.env);
  const serverOptions = { ...exe, transport: TransportKind.stdio };
  const clientOptions = {
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "file", pattern: "**/.tensorviz/recipes.toml" },
    ],
    synchronize: { fileEvents: watcher, configurationSection: "tensorviz" },
    initializationOptions: { tensorviz: serverSettings(settings()) },
    outputChannelName: "TensorViz",
    middleware: {
      window: { showDocument: (params, next) => panels.showDocument(params, next) },
      // Show in Graph on a graph already open in a tab: the page focused the line; the
      // tab comes forward (it may be hidden behind another).
      executeCommand: async (command, args, next) => {
        const result = await next(command, args);
        if (command === "tensorviz.showInGraph" && result && result.shown === "page") panels.revealCapture(result.capture);
        return result;
      },
    },
  };
  return new LanguageClient("tensorviz", "TensorViz", serverOptions, clientOptions);
}

// tensorviz.followCursor: the cursor's line, on every selection change, as the server's
// `tensorviz/cursor {uri, line}` notification (VS Code asks for document highlights as the
// cursor moves too, but only while it is on a word). Only when the line changed.
function cursorFollower() {
  let last = "";
  return (e) => {
    const doc = e.textEditor && e.textEditor.document;
    if (!client || !doc || doc.uri.scheme !== "file" || doc.languageId !== "python" || !e.selections.length) return;
    if (!vscode.workspace.getConfiguration("tensorviz", doc.uri).get("followCursor")) return;
    const uri = doc.uri.toString();
    const line = e.selections[0].active.line;
    if (`${uri}:${line}` === last) return;
    last = `${uri}:${line}`;
    Promise.resolve(client.sendNotification("tensorviz/cursor", { uri, line })).catch(() => {});
  };
}

async function activate(context) {
  // One watcher for the extension's lifetime: a restarted client reuses it.
  const watcher = vscode.workspace.createFileSystemWatcher("**/{*.py,.tensorviz/recipes.toml}");
  panels = new ViewerPanels(vscode);
  context.subscriptions.push(watcher, { dispose: () => panels && panels.dispose() });
  client = createClient(watcher);
  context.subscriptions.push(
    vscode.commands.registerCommand("tensorviz.restartServer", async () => {
      if (client) await client.stop();
      client = createClient(watcher);
      await client.start();
    }),
    vscode.commands.registerCommand("tensorviz.openViewerInBrowser", () => panels.openInBrowser()),
    vscode.window.onDidChangeTextEditorSelection(cursorFollower()),
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
