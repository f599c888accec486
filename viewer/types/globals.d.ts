// What the browser app adds to the page's globals (checked by tsc, viewer/tsconfig.json).

interface Window {
  // The viewer's state and named actions for tests and the editor bridge (static/hooks.js).
  tensorviz: any;
}
