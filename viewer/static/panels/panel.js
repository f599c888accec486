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

export class Panel {
  #open = false;

  constructor(store, name, root, { side = false } = {}) {
    this.store = store;
    this.name = name;
    this.root = root;
    if (root) root.hidden = true;
    store.registerPanel(name, { side });
    store.on("panels", ({ open }) => this.#sync(open.has(name)));
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

  #sync(open) {
    if (this.root) this.root.hidden = !open;
    if (open === this.#open) return;
    this.#open = open;
    if (open) this.shown();
    else this.hidden();
  }
}
