#!/usr/bin/env node
// Loads extension.js as VS Code would, with stand-ins for the `vscode` API and for
// vscode-languageclient's LanguageClient (VS Code itself cannot run in CI), and drives
// the wiring the extension owns:
//   - one file watcher for the extension's lifetime, however often the server restarts;
//   - the viewer's loopback URL (window/showDocument, external) opens in a webview panel
//     framing asExternalUri(url), once per URL; `tensorviz.viewer.openIn = "browser"`
//     and other URLs go on to the client's own handler (the browser);
//   - go-to-source while the graph is visible lands in an editor column beside it;
//   - "Open Viewer in Browser" opens the last graph's URL externally;
//   - Show in Graph answered by an open page reveals that page's tab;
//   - with tensorviz.followCursor, a selection change in a Python file sends
//     `tensorviz/cursor {uri, line}` once per line; nothing when the setting is off.
// Prints one JSON object of what it saw; exits 1 when a check fails.
"use strict";

const Module = require("module");
const path = require("path");

const seen = { watchers: 0, clients: 0, started: 0, stopped: 0, panels: [], external: [], shown: [], notifications: [], failures: [] };
const selectionListeners = [];
const config = { "viewer.openIn": undefined };
const commands = new Map();

class Uri {
  constructor(text) { this.text = text; }
  static parse(text) { return new Uri(text); }
  toString() { return this.text; }
}
class Range {
  constructor(a, b, c, d) { this.start = { line: a, character: b }; this.end = { line: c, character: d }; }
}

const vscode = {
  Uri,
  Range,
  ViewColumn: { Active: -1, Beside: -2, One: 1, Two: 2 },
  workspace: {
    createFileSystemWatcher: () => { seen.watchers += 1; return { dispose() {} }; },
    getConfiguration: () => ({ get: (key) => config[key] }),
    onDidChangeConfiguration: () => ({ dispose() {} }),
  },
  commands: {
    registerCommand: (name, fn) => { commands.set(name, fn); return { dispose() {} }; },
    executeCommand: (name, ...args) => commands.get(name)(...args),
  },
  env: {
    // A remote window maps the port: the panel must frame the mapped URL.
    asExternalUri: async (uri) => Uri.parse(uri.toString().replace("127.0.0.1:8123", "127.0.0.1:9555")),
    openExternal: async (uri) => { seen.external.push(uri.toString()); return true; },
  },
  window: {
    createWebviewPanel: (viewType, title, show, options) => {
      const listeners = [];
      const panel = {
        viewType, title, show, options, visible: true, viewColumn: vscode.ViewColumn.Two, revealed: 0,
        webview: { html: "" },
        reveal() { this.revealed += 1; },
        onDidDispose(fn) { listeners.push(fn); },
        dispose() { this.visible = false; listeners.forEach((fn) => fn()); },
      };
      seen.panels.push(panel);
      return panel;
    },
    showTextDocument: async (uri, options) => { seen.shown.push({ uri: uri.toString(), ...options }); },
    showInformationMessage: () => undefined,
    onDidChangeTextEditorSelection: (fn) => { selectionListeners.push(fn); return { dispose() {} }; },
  },
};

let lastClient;
class LanguageClient {
  constructor(id, name, serverOptions, clientOptions) {
    seen.clients += 1;
    this.clientOptions = clientOptions;
    lastClient = this;
  }
  async start() { seen.started += 1; }
  async stop() { seen.stopped += 1; }
  async sendNotification(method, params) { seen.notifications.push({ method, params }); }
}

const realLoad = Module._load;
Module._load = function load(request, parent, isMain) {
  if (request === "vscode") return vscode;
  if (request === "vscode-languageclient/node") return { LanguageClient, TransportKind: { stdio: 0 } };
  return realLoad.call(this, request, parent, isMain);
};

function check(ok, what) {
  if (!ok) seen.failures.push(what);
}

async function main() {
  const extension = require(path.join(__dirname, "..", "extension.js"));
  const context = { subscriptions: [] };
  await extension.activate(context);
  await vscode.commands.executeCommand("tensorviz.restartServer");
  await vscode.commands.executeCommand("tensorviz.restartServer");
  check(seen.watchers === 1, `one file watcher across restarts (saw ${seen.watchers})`);
  check(seen.clients === 3 && seen.stopped === 2, "each restart stops the old client and starts a new one");
  check(lastClient.clientOptions.synchronize.fileEvents !== undefined, "the client synchronises the watcher's events");

  const showDocument = lastClient.clientOptions.middleware.window.showDocument;
  const passed = [];
  const next = async (params) => { passed.push(params.uri); return { success: true }; };
  const url = "http://127.0.0.1:8123/AbCdEfGhIjKlMnOpQrStUvWx/?capture=3";

  let result = await showDocument({ uri: url, external: true }, next);
  check(result.success === true && passed.length === 0, "the viewer URL opens in the editor by default");
  check(seen.panels.length === 1, "one panel");
  const html = seen.panels[0] ? seen.panels[0].webview.html : "";
  check(html.includes('src="http://127.0.0.1:9555/AbCdEfGhIjKlMnOpQrStUvWx/?capture=3"'), "the panel frames asExternalUri(url)");
  check(html.includes("frame-src http://127.0.0.1:9555;") && html.includes("default-src 'none'"), "the panel's policy allows only that frame");
  check(seen.panels[0] && seen.panels[0].options.enableScripts === true, "scripts enabled (the viewer is a script)");

  await showDocument({ uri: url, external: true }, next);
  check(seen.panels.length === 1 && seen.panels[0].revealed === 1, "the same URL reveals its panel again");

  const file = "file:///ws/model.py";
  result = await showDocument({ uri: file, external: false, takeFocus: true,
    selection: { start: { line: 4, character: 4 }, end: { line: 4, character: 7 } } }, next);
  const shown = seen.shown[0] || {};
  check(result.success === true && shown.uri === file && shown.viewColumn === vscode.ViewColumn.One,
    "go-to-source opens beside the graph, in this window");
  check(shown.selection && shown.selection.start.line === 4 && shown.selection.end.character === 7, "at the node's line");

  await vscode.commands.executeCommand("tensorviz.openViewerInBrowser");
  check(seen.external[0] === url, "Open Viewer in Browser opens the last graph's URL");

  config["viewer.openIn"] = "browser";
  const other = "http://127.0.0.1:8124/ZyXwVuTsRqPoNmLkJiHgFeDc/?capture=1";
  await showDocument({ uri: other, external: true }, next);
  check(passed.includes(other) && seen.panels.length === 1, "openIn = browser hands the URL to the browser");
  config["viewer.openIn"] = undefined;
  await showDocument({ uri: "https://example.com/docs", external: true }, next);
  check(passed.includes("https://example.com/docs") && seen.panels.length === 1, "other URLs are not framed");

  // Show in Graph on the open graph: its tab comes forward (no new panel); other commands
  // and a URL opened instead change nothing here.
  const execute = lastClient.clientOptions.middleware.executeCommand;
  const revealed = seen.panels[0].revealed;
  let answer = await execute("tensorviz.showInGraph", [{ uri: "file:///ws/model.py", line: 5 }],
    async () => ({ ok: true, shown: "page", capture: 3 }));
  check(answer.shown === "page" && seen.panels[0].revealed === revealed + 1 && seen.panels.length === 1,
    "Show in Graph on an open graph reveals its tab");
  await execute("tensorviz.showInGraph", [], async () => ({ ok: true, shown: "url", capture: 3 }));
  await execute("tensorviz.showViewer", [], async () => ({ ok: true, shown: "page", capture: 3 }));
  check(seen.panels[0].revealed === revealed + 1, "only Show in Graph's page answer reveals a tab");

  // Follow the cursor: off by default, then one notification per line moved to.
  const move = (line, languageId = "python", scheme = "file") => selectionListeners.forEach((fn) => fn({
    textEditor: { document: { languageId, uri: { scheme, toString: () => `${scheme}:///ws/model.py` } } },
    selections: [{ active: { line, character: 4 } }],
  }));
  move(5);
  check(seen.notifications.length === 0, "followCursor off: no cursor notification");
  config.followCursor = true;
  move(5);
  move(5);
  move(4);
  move(7, "toml");
  move(8, "python", "untitled");
  check(JSON.stringify(seen.notifications) === JSON.stringify([
    { method: "tensorviz/cursor", params: { uri: "file:///ws/model.py", line: 5 } },
    { method: "tensorviz/cursor", params: { uri: "file:///ws/model.py", line: 4 } },
  ]), `one tensorviz/cursor per line moved to, Python files only (saw ${JSON.stringify(seen.notifications)})`);
  config.followCursor = undefined;

  seen.panels[0].dispose();
  await showDocument({ uri: "file:///ws/other.py", external: false }, next);
  check(passed.includes("file:///ws/other.py"), "without a visible graph, go-to-source is the client's");
  for (const s of context.subscriptions) if (s && s.dispose) s.dispose();
  await extension.deactivate();

  const out = { ...seen, panels: seen.panels.length };
  console.log(JSON.stringify(out));
  process.exit(seen.failures.length ? 1 : 0);
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(2);
});
