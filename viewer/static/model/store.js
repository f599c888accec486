// The viewer's state, and the only ways to change it: named actions, each followed by a
// change event. The page's parts (the panels, the renderer's wiring in app.js, the
// settler) read the state through getters and subscribe to what they show
// (`store.on(topic, fn)`); none of them writes it. What the graph *means* (the loaded
// containers, layouts, the composed scene) stays in the view model (viewmodel.js); the
// store holds which capture and model are on screen and asks the model to change.
//
// Topics, and what a listener receives:
//   "capture"    {capture, live}: another capture is on screen (live: it replaces the
//                previous one in place, a recapture; its scene follows)
//   "status"     {ready, error}: the page is ready, or could not load
//   "selection"  {key, value, multi}: the selected item, the weight value shown for it
//                (a weight line clicked inside an op), the items selected together
//                (a source line's, Show in Graph)
//   "outline"    {keys}: the editor's cursor line, outlined lightly (a Set, or null)
//   "panels"     {open, side}: the names of the open panels, and the open side panel
//   "options"    {weightPills, kernels, perDevice}: how the graph is drawn (parameters as
//                pills or inside ops; every kernel, or layers and function calls; shapes
//                as one device holds them, or global with their split)
//   "expansion"  {}: what is open changed, and the new scene is laid out
//   "scene"      {scene}: a new scene is ready to draw (after any action that lays out,
//                and after settling estimated containers)
//
// Expansion actions resolve true when the new scene is laid out and false when a newer
// change superseded it (its scene then arrives with that one); they throw when the
// layout failed. Listeners run synchronously, in the order they subscribed.

import { GraphModel } from "./viewmodel.js";
import { perDeviceShapes, setPerDeviceShapes } from "../draw/theme.js";

/**
 * @typedef {import("../api.js").Api} Api
 * @typedef {import("../layout/layout-client.js").LayoutClient} LayoutClient
 * @typedef {import("./paths.js").SavedPaths} SavedPaths
 * @typedef {import("../layout/settle.js").View} View
 */

/**
 * The `api/capture` answer on screen (viewer/API.md): the store keeps it whole and reads
 * only its `trunk`; the page's parts read the rest through typedefs of their own (the
 * inspector's CaptureInfo, the diff panel's DiffStore), so here it stays the API client's
 * JSON answer.
 * @typedef {import("../api.js").Answer} CaptureAnswer
 */

/**
 * The selection: the selected item (null: none), the weight value shown for it (a card's
 * weight line: the value's id), the items selected together.
 * @typedef {{key: string | null, value: number | null, multi: Set<string> | null}} Selection
 */

/**
 * What each topic's listeners receive (the list above).
 * @typedef {object} StoreEvents
 * @property {{capture: CaptureAnswer, live: boolean}} capture
 * @property {{ready: boolean, error: string | null}} status
 * @property {Selection} selection
 * @property {{keys: Set<string> | null}} outline
 * @property {{open: Set<string>, side: string | null}} panels
 * @property {{weightPills: boolean, kernels: boolean, perDevice: boolean}} options
 * @property {{}} expansion
 * @property {{scene: GraphModel["scene"]}} scene  the model's scene, composed (set) when it is sent
 */

/** @typedef {keyof StoreEvents} Topic */

export class Store {
  /** @type {Api} */
  #api;
  /** @type {LayoutClient} */
  #layout;
  /** @type {CaptureAnswer | null} */
  #capture = null;
  /** @type {GraphModel} */
  #model;
  #ready = false;
  /** @type {string | null} */
  #error = null;
  /** @type {Selection} */
  #selection = { key: null, value: null, multi: null };
  /** @type {Set<string> | null} */
  #outline = null;
  /** @type {Map<string, {side: boolean}>} */
  #panels = new Map(); // name -> {side}
  /** @type {Set<string>} */
  #open = new Set();
  #liveUpdates = 0;
  /** @type {Map<string, ((detail: any) => void)[]>} */
  #listeners = new Map();

  /**
   * @param {Api} api
   * @param {LayoutClient} layout
   */
  constructor(api, layout) {
    this.#api = api;
    this.#layout = layout;
    this.#model = this.newModel();
  }

  // ---------------------------------------------------------------- events

  // `fn` receives the topic's detail (StoreEvents[topic]). Typed as PanelStore's `on` is
  // (panels/panel.js), which the panels read the store through: any topic name, and the
  // detail `any`, each listener saying what it reads of it.
  /**
   * @param {string} topic
   * @param {(detail: any) => void} fn
   * @returns {() => void}  stops listening
   */
  on(topic, fn) {
    let list = this.#listeners.get(topic);
    if (!list) this.#listeners.set(topic, (list = []));
    list.push(fn);
    return () => {
      const i = list.indexOf(fn);
      if (i >= 0) list.splice(i, 1);
    };
  }

  /**
   * @template {Topic} T
   * @param {T} topic
   * @param {StoreEvents[T]} detail
   */
  #emit(topic, detail) {
    for (const fn of [...(this.#listeners.get(topic) || [])]) fn(detail);
  }

  // ---------------------------------------------------------------- reading

  get capture() {
    return this.#capture;
  }

  get model() {
    return this.#model;
  }

  get scene() {
    return this.#model ? this.#model.scene : null;
  }

  get ready() {
    return this.#ready;
  }

  get error() {
    return this.#error;
  }

  get selected() {
    return this.#selection.key;
  }

  get multi() {
    return this.#selection.multi;
  }

  get outlined() {
    return this.#outline;
  }

  get weightPills() {
    return this.#model ? this.#model.showWeights : false;
  }

  get kernels() {
    return this.#model ? this.#model.kernels : false;
  }

  // Shapes as one device holds them (a program split across devices), or global ones.
  get perDevice() {
    return perDeviceShapes();
  }

  get liveUpdates() {
    return this.#liveUpdates;
  }

  /** @param {string} panel */
  isOpen(panel) {
    return this.#open.has(panel);
  }

  // The open panel on the page's side (the inspector or the setup form), or null.
  get sidePanel() {
    for (const name of this.#open) if (this.#panels.get(name)?.side) return name; // an open panel is a registered one
    return null;
  }

  // The item laid out under `key` in the scene on screen, or null.
  /** @param {string | null | undefined} key */
  itemOf(key) {
    const scene = this.scene;
    return (key && scene && scene.byKey.get(key)) || null;
  }

  // A view model for the capture this page reads (the API client's capture id), not yet
  // on screen: adoptCapture() puts it there.
  /**
   * @param {{weightPills?: boolean, kernels?: boolean}} [options]
   * @returns {GraphModel}
   */
  newModel({ weightPills = false, kernels = false } = {}) {
    const model = new GraphModel(this.#api, this.#layout);
    model.showWeights = weightPills;
    model.kernels = kernels;
    return model;
  }

  // ---------------------------------------------------------------- the capture, the page

  // `capture` (the api/capture answer) is on screen, shown by the model the page started with.
  /** @param {CaptureAnswer} capture */
  adoptCapture(capture) {
    this.#capture = capture;
    this.#emit("capture", { capture, live: false });
  }

  // The recapture of the graph on screen replaces it in place: `capture`, shown by `model`
  // (expanded as the person had it), is laid out and shown; another capture's items are no
  // longer selected or outlined. Resolves as relayout() does, and counts the update then.
  /**
   * @param {CaptureAnswer} capture
   * @param {GraphModel} model
   * @returns {Promise<boolean>}
   */
  async replaceCapture(capture, model) {
    this.#capture = capture;
    this.#model = model;
    this.#emit("capture", { capture, live: true });
    this.#setSelection(null, null, null);
    this.outline(null);
    const ok = await this.#laidOut(model);
    this.#liveUpdates += 1;
    return ok;
  }

  markReady() {
    this.#ready = true;
    this.#emit("status", { ready: true, error: this.#error });
  }

  /** @param {string} message */
  fail(message) {
    this.#error = message;
    this.#ready = true;
    this.#emit("status", { ready: true, error: message });
  }

  // ---------------------------------------------------------------- selection

  // One item selected (null: none). The items selected together stay only with `keepMulti`.
  /**
   * @param {string | null | undefined} key
   * @param {{keepMulti?: boolean}} [options]
   */
  select(key, { keepMulti = false } = {}) {
    this.#setSelection(key || null, null, keepMulti ? this.#selection.multi : null);
  }

  // A weight line clicked inside an op's card: the op stays selected, the value is shown.
  /**
   * @param {string} nodeKey
   * @param {number} value  the weight value's id
   */
  selectWeight(nodeKey, value) {
    this.#setSelection(nodeKey, value, this.#selection.multi);
  }

  // Several items selected together (a source line's), the first one shown.
  /** @param {Iterable<string>} keys */
  selectTogether(keys) {
    const list = [...keys];
    this.#setSelection(list[0] || null, null, new Set(list));
  }

  /**
   * @param {string | null} key
   * @param {number | null} value
   * @param {Set<string> | null} multi
   */
  #setSelection(key, value, multi) {
    this.#selection = { key, value, multi };
    this.#emit("selection", { ...this.#selection });
  }

  // The editor's cursor line: these items outlined (null: none).
  /** @param {Set<string> | null} keys */
  outline(keys) {
    this.#outline = keys && keys.size ? new Set(keys) : null;
    this.#emit("outline", { keys: this.#outline });
  }

  // ---------------------------------------------------------------- panels

  // A panel takes part in the page's panels; a side panel shares the page's side with the
  // other side panels, one at a time.
  /**
   * @param {string} name
   * @param {{side?: boolean}} [options]
   */
  registerPanel(name, { side = false } = {}) {
    this.#panels.set(name, { side });
  }

  /** @param {string} name */
  openPanel(name) {
    const p = this.#panels.get(name);
    if (!p) throw new Error(`no panel ${name}`);
    if (this.#open.has(name)) return;
    if (p.side) for (const other of [...this.#open]) if (this.#panels.get(other)?.side) this.#open.delete(other);
    this.#open.add(name);
    this.#emitPanels();
  }

  /** @param {string} name */
  closePanel(name) {
    if (!this.#open.delete(name)) return;
    this.#emitPanels();
  }

  /** @param {string} name */
  togglePanel(name) {
    if (this.#open.has(name)) this.closePanel(name);
    else this.openPanel(name);
  }

  #emitPanels() {
    this.#emit("panels", { open: new Set(this.#open), side: this.sidePanel });
  }

  // ---------------------------------------------------------------- what is open

  // The first view: what the person had open for this profile (`saved`, expansion paths),
  // else the model's first view (the capture's trunk open: the groups that hold most of
  // the program, `api/capture` `trunk`), then, while Fit would need less than `minFit`
  // (`fitScale()`: the renderer's Fit zoom of the scene laid out), the groups it opened
  // last close again.
  /**
   * @param {{saved?: Partial<SavedPaths> | null, fitScale: () => number, minFit: number}} options
   * @returns {Promise<boolean>}
   */
  async firstView({ saved = null, fitScale, minFit }) {
    const m = this.#model;
    const restored = !!saved && (await m.restorePaths(saved));
    if (!restored) await m.autoExpand(undefined, this.#capture ? this.#capture.trunk : null);
    let ok = await this.#laidOut(m);
    while (ok && !restored && fitScale() < minFit && m.closeLastOpened()) ok = await this.#laidOut(m);
    return this.#expanded(m, ok);
  }

  // Opens a group, chunk or control-flow boundary; a stack key unfolds the stack.
  /** @param {string} key */
  expand(key) {
    return this.#edit((m) => {
      if (key.startsWith("s")) m.unfold(key);
      else if (!m.expanded.has(key)) m.toggle(key);
    });
  }

  // Closes a container and everything open inside it.
  /** @param {string} key */
  collapse(key) {
    return this.#edit((m) => {
      if (m.expanded.has(key)) m.toggle(key);
    });
  }

  // Whether `key` can be opened or closed: groups, chunks, stacks, boundaries with bodies,
  // function calls (to their kernels); not a group drawn as its one op, nor an idle one.
  /** @param {string} key */
  canOpen(key) {
    return this.#model.openable(key);
  }

  /** @param {string} key */
  isExpanded(key) {
    return this.#model.expanded.has(key);
  }

  /** @param {string} key */
  toggle(key) {
    if (!this.canOpen(key)) return Promise.resolve(false);
    return key.startsWith("s") || !this.#model.expanded.has(key) ? this.expand(key) : this.collapse(key);
  }

  // A stack of identical blocks opened into its members (the first one expanded).
  /** @param {string} stackKey */
  unfold(stackKey) {
    return this.#edit((m) => m.unfold(stackKey));
  }

  // Makes an item visible: every container on `itemPath` (the server's item keys from the
  // root to it) opens; without one, the item is looked for down `groupIds` and in chunks.
  /**
   * @param {string} key
   * @param {{itemPath?: string[] | null, groupIds?: number[]}} [options]
   */
  reveal(key, { itemPath = null, groupIds = [] } = {}) {
    return this.#apply((m) => (itemPath && itemPath.length ? m.revealPath(itemPath) : m.reveal(key, groupIds)));
  }

  // Makes several items visible at once (a source line's): each one's path opens; a
  // target folded into a stack of identical blocks opens that stack.
  /** @param {string[][]} itemPaths */
  revealAll(itemPaths) {
    return this.#apply((m) => m.revealPaths(itemPaths));
  }

  // Every group and chunk open, every stack unfolded.
  expandAll() {
    return this.#apply(async (m) => {
      await m.expandAll();
      return m.refresh();
    });
  }

  collapseAll() {
    return this.#edit((m) => m.collapseAll());
  }

  // Every group and chunk down to `depth` levels below the root open, the rest closed.
  /** @param {number} depth */
  setDepth(depth) {
    return this.#apply(async (m) => {
      await m.expandToDepth(depth);
      return m.refresh();
    });
  }

  // Parameters, buffers and constants as pills of their own (true) or inside their ops.
  /** @param {boolean} on */
  setWeightPills(on) {
    const m = this.#model;
    if (m.showWeights === !!on) return this.relayout();
    m.showWeights = !!on;
    this.#emit("options", { weightPills: m.showWeights, kernels: m.kernels, perDevice: perDeviceShapes() });
    return this.relayout();
  }

  // Every kernel everywhere (true: the pages' `kernels=1`, function calls are groups that
  // Expand all and Depth… open too) or layers and function calls (false, the default).
  // What is open stays open; with Expand all on, the calls open as well.
  /** @param {boolean} on */
  setKernels(on) {
    const m = this.#model;
    if (m.kernels === !!on) return this.relayout();
    m.kernels = !!on;
    this.#emit("options", { weightPills: m.showWeights, kernels: m.kernels, perDevice: perDeviceShapes() });
    return this.relayout();
  }

  // Shapes as one device holds them (true) or global, with their split (false): every
  // card line and edge label that shows a shape; laid out again.
  /** @param {boolean} on */
  setPerDevice(on) {
    const m = this.#model;
    if (perDeviceShapes() === !!on) return this.relayout();
    setPerDeviceShapes(on);
    m.changed(); // every card line and edge label that shows a shape reads again
    this.#emit("options", { weightPills: m.showWeights, kernels: m.kernels, perDevice: !!on });
    return this.relayout();
  }

  // Lays the current state out again (and shows it).
  async relayout() {
    const m = this.#model;
    return this.#laidOut(m);
  }

  // Estimated containers the view shows ({x0, y0, x1, y1, s}) laid out for real; true with
  // a new scene.
  /** @param {View} view */
  async settle(view) {
    const m = this.#model;
    const ok = await m.settle(view);
    if (ok && m === this.#model) this.#emit("scene", { scene: m.scene });
    return ok && m === this.#model;
  }

  // A change of what is open: `edit(model)` changes it, then it is laid out and shown.
  /**
   * @param {(model: GraphModel) => unknown} edit
   * @returns {Promise<boolean>}
   */
  async #edit(edit) {
    const m = this.#model;
    edit(m);
    return this.#expanded(m, await this.#laidOut(m));
  }

  // A change of what is open that lays itself out (`apply(model)` resolves as refresh()
  // does); then the new scene is shown.
  /**
   * @param {(model: GraphModel) => Promise<boolean>} apply
   * @returns {Promise<boolean>}
   */
  async #apply(apply) {
    const m = this.#model;
    const ok = (await apply(m)) && m === this.#model;
    if (ok) this.#emit("scene", { scene: m.scene });
    return this.#expanded(m, ok);
  }

  /**
   * @param {GraphModel} m
   * @param {boolean} ok
   */
  #expanded(m, ok) {
    if (ok && m === this.#model) this.#emit("expansion", {});
    return ok;
  }

  /**
   * @param {GraphModel} m
   * @returns {Promise<boolean>}
   */
  async #laidOut(m) {
    const ok = await m.refresh();
    if (!ok || m !== this.#model) return false;
    this.#emit("scene", { scene: m.scene });
    return true;
  }
}
