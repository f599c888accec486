// The graph viewer inside VS Code: the language server asks the editor to show the
// viewer's loopback URL (`window/showDocument`, external). With
// `tensorviz.viewer.openIn = "editor"` (the default) that URL opens in an editor tab, a
// webview panel framing the viewer, instead of the browser; go-to-source from that tab
// lands in an editor column beside it, in the same window. Plain Node with `vscode`
// passed in, so that test/extension-harness.js can drive it with a stand-in.
"use strict";

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]"]);

/** True for the viewer's own URL: http on loopback, with a port and a token path. */
function isViewerUrl(uri) {
  let url;
  try {
    url = new URL(uri);
  } catch {
    return false;
  }
  return url.protocol === "http:" && LOOPBACK_HOSTS.has(url.hostname) && url.port !== ""
    && /^\/[A-Za-z0-9_-]{16,}\//.test(url.pathname);
}

function escapeAttr(text) {
  return String(text).replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** The panel's page: one frame filling the tab, and a policy that allows nothing else. */
function panelHtml(frameSrc) {
  const origin = new URL(frameSrc).origin;
  const csp = `default-src 'none'; frame-src ${origin}; style-src 'unsafe-inline'`;
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${escapeAttr(csp)}">
<style>html, body, iframe { margin: 0; padding: 0; border: 0; width: 100%; height: 100%; overflow: hidden; }</style>
</head>
<body><iframe src="${escapeAttr(frameSrc)}" title="TensorViz graph viewer"></iframe></body>
</html>`;
}

class ViewerPanels {
  /** @param {any} vscode the `vscode` module (or a stand-in) */
  constructor(vscode) {
    this.vscode = vscode;
    /** @type {Map<string, any>} viewer URL -> webview panel */
    this.panels = new Map();
    this.lastUrl = undefined;
  }

  openIn() {
    return this.vscode.workspace.getConfiguration("tensorviz").get("viewer.openIn") || "editor";
  }

  /** vscode-languageclient's `middleware.window.showDocument`. */
  async showDocument(params, next) {
    if (params.external && isViewerUrl(params.uri)) {
      this.lastUrl = params.uri;
      if (this.openIn() === "editor") {
        await this.open(params.uri);
        return { success: true };
      }
      return next(params);
    }
    if (!params.external && String(params.uri).startsWith("file:") && this.visiblePanel()) {
      return this.revealSource(params);
    }
    return next(params);
  }

  visiblePanel() {
    for (const panel of this.panels.values()) if (panel.visible) return panel;
    return undefined;
  }

  async open(url) {
    const vscode = this.vscode;
    const existing = this.panels.get(url);
    if (existing) {
      existing.reveal();
      return existing;
    }
    // asExternalUri: the same URL on a local desktop; a forwarded one in a remote window.
    const external = await vscode.env.asExternalUri(vscode.Uri.parse(url));
    const panel = vscode.window.createWebviewPanel(
      "tensorviz.viewer",
      "TensorViz graph",
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: false },
      // Scripts on: the sandbox of a webview passes to the frames inside it, and the viewer
      // is a script. The panel's own page has none (its policy forbids them).
      { enableScripts: true, retainContextWhenHidden: true },
    );
    panel.webview.html = panelHtml(external.toString(true));
    this.panels.set(url, panel);
    panel.onDidDispose(() => this.panels.delete(url));
    return panel;
  }

  /** Show in Graph focused a graph that is already open (the command answered
   *  `{shown: "page", capture}`): bring its tab forward, keeping the cursor in the source.
   *  A tab that followed a recapture in place still has its first URL: when no tab names
   *  the capture, the only tab open is the one. */
  revealCapture(capture) {
    let match;
    for (const [url, panel] of this.panels) {
      try {
        if (new URL(url).searchParams.get("capture") === String(capture)) match = panel;
      } catch {
        // not a URL: no capture to compare
      }
    }
    if (!match && this.panels.size === 1) match = [...this.panels.values()][0];
    if (match) match.reveal(undefined, true);
    return !!match;
  }

  /** Go-to-source while the graph is on screen: the file opens in a column beside the
   *  graph, so that clicking a node never hides the graph behind the source. */
  async revealSource(params) {
    const vscode = this.vscode;
    const panel = this.visiblePanel();
    const column = panel.viewColumn === vscode.ViewColumn.One ? vscode.ViewColumn.Two : vscode.ViewColumn.One;
    const options = { viewColumn: column, preserveFocus: params.takeFocus === false };
    if (params.selection) {
      const s = params.selection;
      options.selection = new vscode.Range(s.start.line, s.start.character, s.end.line, s.end.character);
    }
    try {
      await vscode.window.showTextDocument(vscode.Uri.parse(params.uri), options);
      return { success: true };
    } catch {
      return { success: false };
    }
  }

  /** "TensorViz: Open Viewer in Browser": the last graph, in the default browser. */
  async openInBrowser() {
    const vscode = this.vscode;
    if (!this.lastUrl) {
      vscode.window.showInformationMessage("TensorViz: no graph has been opened yet.");
      return false;
    }
    return vscode.env.openExternal(vscode.Uri.parse(this.lastUrl));
  }

  dispose() {
    for (const panel of [...this.panels.values()]) panel.dispose();
    this.panels.clear();
  }
}

module.exports = { ViewerPanels, isViewerUrl, panelHtml };
