// API client for the viewer server (contract: viewer/API.md).
//
// Every URL is relative to the page, which lives under the server's per-run token
// prefix, so requests carry the token without cookies or headers.

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export class Api {
  constructor(captureId = null) {
    this.captureId = captureId; // ?capture=ID of the page, passed on to every read
  }

  // `forCapture`: whether the page's capture id goes along (reads and events do; a
  // dropped graph file opens a new capture, so it does not).
  url(path, params = {}, forCapture = true) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) q.set(k, String(v));
    if (forCapture && this.captureId !== null && !q.has("capture")) q.set("capture", this.captureId);
    const s = q.toString();
    return "api/" + path + (s ? "?" + s : "");
  }

  get(path, params) {
    return this._request(this.url(path, params));
  }

  post(path, body, params) {
    return this._request(this.url(path, params), { method: "POST", contentType: "application/json", body: JSON.stringify(body) });
  }

  postBytes(path, bytes, params = {}) {
    return this._request(this.url(path, params, false), { method: "POST", contentType: "application/octet-stream", body: bytes });
  }

  async _request(url, { method = "GET", contentType, body } = {}) {
    const headers = { Accept: "application/json" };
    if (contentType) headers["Content-Type"] = contentType;
    const res = await fetch(url, { method, headers, body });
    return this._json(res);
  }

  async _json(res) {
    let body = null;
    const text = await res.text();
    if (text) {
      try {
        body = JSON.parse(text);
      } catch (e) {
        body = { text };
      }
    }
    if (!res.ok) {
      const msg = (body && (body.error || body.message)) || `${res.status} ${res.statusText}`;
      throw new ApiError(res.status, msg, body);
    }
    return body;
  }

  capture() {
    return this.get("capture");
  }
  // `kernels`: every kernel of the capture, not the layers and function calls a person reads.
  children(group, chunk, kernels = false) {
    return this.get("children", { group, chunk, kernels: kernels ? 1 : undefined });
  }

  // The unexecuted control-flow bodies of a boundary node, side by side (a children view).
  bodies(node) {
    return this.get("bodies", { node });
  }
  // Every container under `group` in one answer: {views:{key: children view}, complete},
  // up to `maxItems` items (the server's cap without one).
  subtree(group, { maxItems = null, kernels = false } = {}) {
    return this.get("subtree", { group, max_items: maxItems || undefined, kernels: kernels ? 1 : undefined });
  }
  node(id) {
    return this.get("node", { id });
  }
  value(id) {
    return this.get("value", { id });
  }
  group(id) {
    return this.get("group", { id });
  }
  // `filters`: {op, class, shape, dtype}, each narrowing every kind of result.
  search(q, limit = 50, filters = {}) {
    const f = {};
    for (const k of ["op", "class", "shape", "dtype"]) if (filters[k]) f[k] = filters[k];
    return this.get("search", { q, limit, ...f });
  }
  // What the capture costs; with `device`, the roofline times on that profile (estimates).
  cost(device) {
    return this.get("cost", { device: device || undefined });
  }
  source(file, line, context = 6) {
    return this.get("source", { file, line, context });
  }
  reveal(frame) {
    return this.post("reveal", { frame });
  }
  // The form of `profile` (the graph on screen); without one, the embedder's current form.
  setup(profile) {
    return this.get("setup", { profile });
  }
  saveProfile(name, recipe) {
    return this.post("profile", { name, recipe });
  }
  startCapture(profile) {
    return this.post("capture", { profile });
  }
  open(bytes, name) {
    return this.postBytes("open", bytes, name ? { name } : {});
  }

  events(handlers) {
    const source = new EventSource(this.url("events"));
    for (const [name, fn] of Object.entries(handlers)) {
      source.addEventListener(name, (ev) => {
        let data = {};
        try {
          data = ev.data ? JSON.parse(ev.data) : {};
        } catch (e) {
          data = {};
        }
        fn(data);
      });
    }
    return source;
  }
}
