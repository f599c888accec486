// One pattern for every panel of the page (the inspector, the setup form, the search
// results, the diff list, the source line's banner): a panel is a part of the page with a
// name the store knows, opened and closed only through the store (`openPanel`,
// `closePanel`), and it shows or hides itself when the store says which panels are open
// (the "panels" event). A side panel shares the page's right side with the other side
// panels, one at a time; the renderer keeps what it centres clear of it (app.js).
//
// A panel class extends Panel, renders into `this.root`, keeps its own working state
// (a query, the results) to itself, and reads and changes the viewer's state through the
// store it was given. `shown()` and `hidden()` run when it opens and closes.

/**
 * What a panel needs of the viewer's store (model/store.js): its panel registry and its
 * events (`on` returns the function that stops listening).
 * @typedef {object} PanelStore
 * @property {(name: string, options?: {side?: boolean}) => void} registerPanel
 * @property {(topic: string, fn: (detail: any) => void) => () => void} on
 * @property {(name: string) => boolean} isOpen
 * @property {(name: string) => void} openPanel
 * @property {(name: string) => void} closePanel
 * @property {(name: string) => void} togglePanel
 */

/** @template {PanelStore} [S=any]  the store as the panel reads it */
export class Panel {
  #open = false;

  /**
   * @param {S} store
   * @param {string} name
   * @param {any} root  the HTMLElement it renders into (null: a panel drawn elsewhere, a banner);
   *   `any` while the subclasses read their own markup untyped (`root.querySelector(…).hidden`)
   * @param {{side?: boolean}} [options]  a side panel (one at a time on the page's right)
   */
  constructor(store, name, root, { side = false } = {}) {
    this.store = store;
    this.name = name;
    this.root = root;
    if (root) root.hidden = true;
    store.registerPanel(name, { side });
    store.on("panels", (/** @type {{open: Set<string>}} */ { open }) => this.#sync(open.has(name)));
  }

  get isOpen() {
    return this.store.isOpen(this.name);
  }

  open() {
    this.store.openPanel(this.name);
  }

  close() {
    this.store.closePanel(this.name);
  }

  toggle() {
    this.store.togglePanel(this.name);
  }

  shown() {}

  hidden() {}

  /** @param {boolean} open */
  #sync(open) {
    if (this.root) this.root.hidden = !open;
    if (open === this.#open) return;
    this.#open = open;
    if (open) this.shown();
    else this.hidden();
  }
}
