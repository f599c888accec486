// API client for the viewer server (contract: viewer/API.md).
//
// Every URL is relative to the page, which lives under the server's per-run token
// prefix, so requests carry the token without cookies or headers.

/**
 * Parameters of a request: its query string (a null or undefined value is left out).
 * @typedef {Record<string, string | number | boolean | null | undefined>} Params
 */

/**
 * An answer of the server: the JSON viewer/API.md documents for each endpoint.
 * @typedef {any} Answer
 */

/**
 * An item of a page (`api/children`, viewer/API.md): a node, a group or a chunk, keyed
 * `n12`, `g3`, `c3:2`. The fields the app's typed modules read; API.md lists the others.
 * @typedef {object} PageItem
 * @property {"node" | "group" | "chunk"} type
 * @property {number | string} id  a chunk's is `"G:K"`
 * @property {string} [key]
 * @property {string} [label]
 * @property {string} [sublabel]
 * @property {string} [kind]
 * @property {string} [card]  how it is drawn: "op", "function", "group", "chunk"
 * @property {number} [child_count]  its direct children
 * @property {unknown[]} [bodies]  a control-flow node's bodies that did not run
 * @property {boolean} [opaque]  a node: opaque to the capture
 * @property {number} [node_count]  a group or chunk: the ops in its subtree
 * @property {string} [title]  a module group: its class and path (`Block · h.3`)
 * @property {string} [class]  a module group: its class
 * @property {string} [function]  a function group: the function called
 * @property {string} [where]  a function group: where it was called
 * @property {string} [template]  a body template's wording
 * @property {string} [honest]  what the group honestly is, in the server's words
 * @property {{count: number, index: number}} [twin]  blocks of the same structure elsewhere, and which this is
 * @property {{name?: string, title?: string, key?: string}[]} [idle]  modules inside that ran no op
 * @property {number} [idle_total]  how many ran no op (`idle` lists the first)
 * @property {{key: string, type?: string, id?: number | string}} [single]  a group drawn as the one op card it holds
 * @property {{key: string}[]} [wrappers]  the modules such a group's card stands for, outermost first
 * @property {number} [first]  a chunk or group: its smallest node id
 * @property {number} [last]  its largest
 * @property {number[]} [range]  a chunk: the positions it holds among its group's children, [a, b)
 * @property {number} [groups]  a chunk: how many of its children are calls (0: a flat run of ops)
 * @property {string} [structure]  a group: the signature identical groups share
 */

/**
 * A run of repeated items a page folds into one stack card (or a fold: `fold` set).
 * @typedef {object} PageStack
 * @property {string} key  "s" + the first member's key
 * @property {string[][]} members  the item keys of each repetition
 * @property {number} count
 * @property {number} period
 * @property {string} [label]
 * @property {string[]} [pattern]
 * @property {string} [fold]
 */

/**
 * A value at a page's boundary (`inputs`, `outputs`).
 * @typedef {object} PageValue
 * @property {number} value  its id
 * @property {string} [key]  "in:V" | "out:V"
 * @property {string} [label]
 * @property {boolean} [weight]  a parameter drawn inside the op that reads it
 */

/**
 * A page: the direct children of a group or chunk (`api/children`, and each container of
 * `api/subtree`), its boundary and the stacks it folds.
 * @typedef {object} Page
 * @property {PageItem[]} items
 * @property {{source: string, target: string, value?: number, label?: string}[]} edges
 * @property {PageValue[]} [inputs]
 * @property {PageValue[]} [outputs]
 * @property {PageStack[]} [stacks]
 * @property {boolean} [chunked]  its items are chunks
 * @property {number} [weights_hidden]  weight inputs left out (no pills asked, or none at an op card)
 * @property {boolean} [weights_asked]  asked with `weights=1`: its pills at op cards are in `inputs`
 */

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} message
   * @param {Answer} body
   */
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export class Api {
  /** @param {string | number | null} [captureId] */
  constructor(captureId = null) {
    this.captureId = captureId; // ?capture=ID of the page, passed on to every read
  }

  // `forCapture`: whether the page's capture id goes along (reads and events do; a
  // dropped graph file opens a new capture, so it does not).
  /**
   * @param {string} path
   * @param {Params} [params]
   * @param {boolean} [forCapture]
   * @returns {string}
   */
  url(path, params = {}, forCapture = true) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) q.set(k, String(v));
    if (forCapture && this.captureId !== null && !q.has("capture")) q.set("capture", String(this.captureId));
    const s = q.toString();
    return "api/" + path + (s ? "?" + s : "");
  }

  /**
   * @param {string} path
   * @param {Params} [params]
   * @returns {Promise<Answer>}
   */
  get(path, params) {
    return this._request(this.url(path, params));
  }

  /**
   * @param {string} path
   * @param {unknown} body  sent as JSON
   * @param {Params} [params]
   * @returns {Promise<Answer>}
   */
  post(path, body, params) {
    return this._request(this.url(path, params), { method: "POST", contentType: "application/json", body: JSON.stringify(body) });
  }

  /**
   * @param {string} path
   * @param {BodyInit} bytes
   * @param {Params} [params]
   * @returns {Promise<Answer>}
   */
  postBytes(path, bytes, params = {}) {
    return this._request(this.url(path, params, false), { method: "POST", contentType: "application/octet-stream", body: bytes });
  }

  /**
   * @param {string} url
   * @param {{method?: string, contentType?: string, body?: BodyInit}} [options]
   */
  async _request(url, { method = "GET", contentType, body } = {}) {
    /** @type {Record<string, string>} */
    const headers = { Accept: "application/json" };
    if (contentType) headers["Content-Type"] = contentType;
    const res = await fetch(url, { method, headers, body });
    return this._json(res);
  }

  /**
   * @param {Response} res
   * @returns {Promise<Answer>}
   */
  async _json(res) {
    /** @type {Answer} */
    let body = null;
    const text = await res.text();
    if (text) {
      try {
        body = JSON.parse(text);
      } catch {
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
  // `weights`: with the pills of parameters, buffers and constants and their edges (the
  // Weights toggle); without it a page leaves them out and counts them (`weights_hidden`).
  /**
   * @param {number} group
   * @param {number | null} [chunk]
   * @param {boolean} [kernels]
   * @param {boolean} [weights]
   */
  children(group, chunk, kernels = false, weights = false) {
    return this.get("children", { group, chunk, kernels: kernels ? 1 : undefined, weights: weights ? 1 : undefined });
  }

  // The unexecuted control-flow bodies of a boundary node, side by side (a children view).
  /** @param {number} node */
  bodies(node) {
    return this.get("bodies", { node });
  }
  // Every container under `group` in one answer: {views:{key: children view}, complete},
  // up to `maxItems` items (the server's cap without one).
  /**
   * @param {number} group
   * @param {{maxItems?: number | null, kernels?: boolean, weights?: boolean}} [options]
   */
  subtree(group, { maxItems = null, kernels = false, weights = false } = {}) {
    return this.get("subtree", { group, max_items: maxItems || undefined, kernels: kernels ? 1 : undefined,
      weights: weights ? 1 : undefined });
  }
  /** @param {number} id */
  node(id) {
    return this.get("node", { id });
  }
  /** @param {number} id */
  value(id) {
    return this.get("value", { id });
  }
  /** @param {number} id */
  group(id) {
    return this.get("group", { id });
  }
  // `filters`: {op, class, shape, dtype}, each narrowing every kind of result.
  /**
   * @param {string} q
   * @param {number} [limit]
   * @param {{op?: string, class?: string, shape?: string, dtype?: string}} [filters]
   */
  search(q, limit = 50, filters = {}) {
    /** @type {Params} */
    const f = {};
    for (const k of /** @type {const} */ (["op", "class", "shape", "dtype"])) if (filters[k]) f[k] = filters[k];
    return this.get("search", { q, limit, ...f });
  }
  // What the capture costs; with `device`, the roofline times on that profile (estimates).
  /** @param {string | null} [device] */
  cost(device) {
    return this.get("cost", { device: device || undefined });
  }
  /**
   * @param {string} file
   * @param {number} line
   * @param {number} [context]
   */
  source(file, line, context = 6) {
    return this.get("source", { file, line, context });
  }
  /** @param {number | object} frame */
  reveal(frame) {
    return this.post("reveal", { frame });
  }
  // The form of `profile` (the graph on screen); without one, the embedder's current form.
  /** @param {string | null} [profile] */
  setup(profile) {
    return this.get("setup", { profile });
  }
  /**
   * @param {string} name
   * @param {object} recipe
   */
  saveProfile(name, recipe) {
    return this.post("profile", { name, recipe });
  }
  /** @param {string} profile */
  startCapture(profile) {
    return this.post("capture", { profile });
  }
  /**
   * @param {BodyInit} bytes
   * @param {string} [name]
   */
  open(bytes, name) {
    return this.postBytes("open", bytes, name ? { name } : {});
  }

  /**
   * @param {Record<string, (data: Answer) => void>} handlers  by event name
   * @returns {EventSource}
   */
  events(handlers) {
    const source = new EventSource(this.url("events"));
    for (const [name, fn] of Object.entries(handlers)) {
      source.addEventListener(name, (ev) => {
        /** @type {Answer} */
        let data = {};
        try {
          data = ev.data ? JSON.parse(ev.data) : {};
        } catch {
          data = {};
        }
        fn(data);
      });
    }
    return source;
  }
}
