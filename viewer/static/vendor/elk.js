// The pinned ELK bundle as an ES module, for the layout module worker
// (layout/layout.worker.js). This small file is TensorViz's own; the bundle it loads,
// `elk.bundled-0.12.1.js` (elkjs 0.12.1), is the Eclipse Layout Kernel under EPL-2.0
// (`elk-LICENSE.txt`), unmodified. The bundle is a UMD script: imported for its side
// effect it finds no CommonJS or AMD loader and defines the global `ELK` (in a worker,
// `self.ELK`), which this module hands on. It is parsed as a module, in strict mode: the
// browser test `tests/viewer/browser/test_layout_worker_elk.py` checks that it lays out.
import "./elk.bundled-0.12.1.js";

export const ELK_VERSION = "0.12.1";
export default globalThis.ELK;
