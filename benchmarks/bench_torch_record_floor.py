"""Which recording mechanism can capture a Torch forward within the targets? (issue 51)

    python benchmarks/bench_torch_record_floor.py [--nanogpt PATH] [--seq 128] [--repeat 5]
                                                  [--only nanogpt,llama,resnet50] [--no-cpp]
                                                  [--fresh-build] [--no-compare]

The targets (batch 1, one thread, process CPU time against the plain forward): statistics
off <= 1.10x and <= 30 us per recorded op; statistics on <= 1.25x and <= 60 us per op. This
is not TensorViz's capture: each row is one recording mechanism alone, recording what a
graph needs where it can (op name, input/output tensor identities for the edges, shapes and
dtypes), on the three models of ``bench_torch_capture.py`` (imported from it: nanoGPT 124 M
from ``--nanogpt PATH``, ``transformers`` Llama 4x256, the ResNet-50 written there; eval
mode, ``torch.no_grad``). The rows:

* Python floor (reference): a ``TorchDispatchMode`` calling straight through, the same
  recording names, tensor identities, shapes and dtypes into lists ("dispatch mode,
  recording"), a ``TorchFunctionMode`` calling straight through, global module pre/post hooks
  doing nothing.
* ``torch.profiler`` (Kineto, C++ ``RecordFunction`` callbacks), CPU activity:
  ``record_shapes=True``; with ``profile_memory=True`` too (the only way its events get tensor
  ids) and the event tree read back (``experimental_event_tree``: names and input ids; it
  records no outputs); with ``with_stack=True`` (Python stacks for go-to-source, by its
  Python tracer); with ``with_modules=True`` too (module scopes).
* ``torch.profiler.ExecutionTraceObserver``: per op the input/output tensor ids, storage ids,
  shapes, dtypes and the parent op, written as JSON; its file read back (``+ read``).
* A C++ ``RecordFunction`` global callback (built here with
  ``torch.utils.cpp_extension.load_inline``; ``--no-cpp`` skips it): per op the name, parent,
  depth, and per tensor the identity (a fresh id for each produced tensor, kept through
  in-place ops), storage, dtype and shape, appended to C++ vectors and handed back as
  tensors (the hand-back is in the time). With frames: the innermost Python frame (code
  object, ``f_lasti``) of each top-level op, and the first frame outside the libraries
  (``site-packages``/stdlib) for go-to-source. With module scopes: Python's global module
  hooks pushing and popping a scope into the same recorder.

Then the op lists compared (``--no-compare`` skips it): what a ``TorchDispatchMode`` sees
(ops after autograd and after ``CompositeImplicitAutograd`` decomposition) against the C++
callback's events and the execution trace's nodes, filtered by the same rule (an event is a
graph op when every op above it is ``CompositeImplicitAutograd`` and it is not one itself),
names (with overload) and edges (each op's inputs' producers). Last, the fixed cost of a
statistics call on a tiny tensor at one thread (``aminmax``, ``var_mean``, ``sum``,
TensorViz's ``stats_now``).

Per op: the median of the pairs' CPU differences over the graph's op count (the dispatch
mode's ops). The load average is printed before and after: the machine may be shared, so
figures are CPU time in A/B-interleaved pairs (``pairs`` of ``bench_torch_capture``).
Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import bench_torch_capture as btc  # noqa: E402

TARGET_OFF, TARGET_ON, US_OFF, US_ON = btc.TARGET_OFF, btc.TARGET_ON, btc.TARGET_US_OFF, btc.TARGET_US_ON

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/record_function.h>
#include <Python.h>
#include <frameobject.h>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace {

// One row per op, one row per tensor reference, one row per module scope.
struct Columns {
  std::vector<int32_t> op_name, op_parent, op_depth, op_frame, op_user_frame, op_scope;
  std::vector<int64_t> op_tensor_begin, op_first_id;
  std::vector<int32_t> t_op;
  std::vector<int8_t> t_role;       // 0 input, 1 output
  std::vector<int64_t> t_id;        // value identity
  std::vector<int64_t> t_storage;   // StorageImpl*, 0 when none
  std::vector<int8_t> t_dtype;
  std::vector<int64_t> t_shape_begin, shapes;  // shapes: rank, then the sizes
  std::vector<PyObject*> frame_code;
  std::vector<int32_t> frame_lasti;
  std::vector<int64_t> scope_key;
  std::vector<int32_t> scope_parent;
};

Columns cols;
std::unordered_map<const char*, int32_t> name_index;  // per overload: the schema's name string
std::vector<std::string> names;
std::unordered_map<const c10::TensorImpl*, int64_t> live;
std::unordered_map<uint64_t, int32_t> frame_index;
std::unordered_map<PyObject*, bool> code_is_library;
std::vector<int32_t> open_ops;
int64_t next_id = 1;
int32_t current_scope = -1;
int frames_mode = 0;  // -1 record nothing (the mechanism's own cost), 0 no frames, 1 innermost frame,
                      // 2 and the first frame outside the libraries
at::CallbackHandle handle = 0;

int32_t intern_name(const at::RecordFunction& fn) {
  const char* n = fn.name();
  auto it = name_index.find(n);
  if (it != name_index.end()) return it->second;
  std::string full(n);
  auto op = fn.operator_name();
  full += ".";
  full += (op && !op->overload_name.empty()) ? op->overload_name : std::string("default");
  int32_t i = static_cast<int32_t>(names.size());
  names.push_back(full);
  name_index.emplace(n, i);
  return i;
}

int32_t intern_frame(PyObject* code, int lasti) {
  uint64_t key = (reinterpret_cast<uint64_t>(code) << 20) ^ static_cast<uint64_t>(lasti);
  auto it = frame_index.find(key);
  if (it != frame_index.end()) return it->second;
  int32_t i = static_cast<int32_t>(cols.frame_code.size());
  Py_INCREF(code);
  cols.frame_code.push_back(code);
  cols.frame_lasti.push_back(lasti);
  frame_index.emplace(key, i);
  return i;
}

bool is_library(PyObject* code) {
  auto it = code_is_library.find(code);
  if (it != code_is_library.end()) return it->second;
  PyObject* fn = PyObject_GetAttrString(code, "co_filename");
  const char* s = fn ? PyUnicode_AsUTF8(fn) : nullptr;
  bool lib = !s || std::strstr(s, "site-packages") || std::strstr(s, "/lib/python") || s[0] == '<';
  Py_XDECREF(fn);
  Py_INCREF(code);  // the cache keys on the pointer: keep the code object
  code_is_library.emplace(code, lib);
  return lib;
}

void record_frames(int32_t op) {
  PyGILState_STATE g = PyGILState_Ensure();  // the op's binding released the GIL
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  int32_t inner = -1, user = -1;
  if (f) {
    PyCodeObject* code = PyFrame_GetCode(f);
    inner = intern_frame(reinterpret_cast<PyObject*>(code), PyFrame_GetLasti(f));
    if (frames_mode == 2) {
      if (!is_library(reinterpret_cast<PyObject*>(code))) {
        user = inner;
      } else {
        PyFrameObject* b = PyFrame_GetBack(f);  // new reference
        while (b) {
          PyCodeObject* bc = PyFrame_GetCode(b);
          bool lib = is_library(reinterpret_cast<PyObject*>(bc));
          if (!lib) user = intern_frame(reinterpret_cast<PyObject*>(bc), PyFrame_GetLasti(b));
          Py_DECREF(bc);
          PyFrameObject* nb = lib ? PyFrame_GetBack(b) : nullptr;
          Py_DECREF(b);
          b = nb;
        }
      }
    }
    Py_DECREF(code);
  }
  PyGILState_Release(g);
  cols.op_frame[op] = inner;
  cols.op_user_frame[op] = user;
}

inline void add_tensor(const at::Tensor& t, int32_t op, int8_t role, int64_t id) {
  cols.t_op.push_back(op);
  cols.t_role.push_back(role);
  cols.t_id.push_back(id);
  cols.t_storage.push_back(t.has_storage() ? reinterpret_cast<int64_t>(t.storage().unsafeGetStorageImpl()) : 0);
  cols.t_dtype.push_back(static_cast<int8_t>(t.scalar_type()));
  cols.t_shape_begin.push_back(static_cast<int64_t>(cols.shapes.size()));
  auto sizes = t.sizes();
  cols.shapes.push_back(static_cast<int64_t>(sizes.size()));
  cols.shapes.insert(cols.shapes.end(), sizes.begin(), sizes.end());
}

// A Python number passed where an op takes a Tensor arrives as a 0-dim "wrapped number"
// tensor: a constant, not a value of the graph (a dispatch mode gets it back as a number).
inline bool is_value(const at::Tensor& t) {
  return t.defined() && !t.unsafeGetTensorImpl()->is_wrapped_number();
}

template <typename F>
inline void each_tensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (is_value(t)) f(t);
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec()) if (is_value(t)) f(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) if (e.isTensor() && is_value(e.toTensor())) f(e.toTensor());
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) if (e.isTensor() && is_value(e.toTensor())) f(e.toTensor());
  }
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (frames_mode < 0) return nullptr;
  int32_t op = static_cast<int32_t>(cols.op_name.size());
  cols.op_name.push_back(intern_name(fn));
  cols.op_parent.push_back(open_ops.empty() ? -1 : open_ops.back());
  cols.op_depth.push_back(static_cast<int32_t>(open_ops.size()));
  cols.op_scope.push_back(current_scope);
  cols.op_tensor_begin.push_back(static_cast<int64_t>(cols.t_op.size()));
  cols.op_first_id.push_back(next_id);
  cols.op_frame.push_back(-1);
  cols.op_user_frame.push_back(-1);
  if (frames_mode > 0 && open_ops.empty()) record_frames(op);  // nested ops share their caller's frame
  open_ops.push_back(op);
  for (const c10::IValue& v : fn.inputs()) {
    each_tensor(v, [&](const at::Tensor& t) {
      auto it = live.find(t.unsafeGetTensorImpl());
      int64_t id;
      if (it != live.end()) {
        id = it->second;
      } else {  // from outside any recorded op: a parameter, the model's input
        id = next_id++;
        live.emplace(t.unsafeGetTensorImpl(), id);
      }
      add_tensor(t, op, 0, id);
    });
  }
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (frames_mode < 0 || open_ops.empty()) return;
  int32_t op = open_ops.back();
  open_ops.pop_back();
  int64_t in_begin = cols.op_tensor_begin[op], in_end = static_cast<int64_t>(cols.t_op.size());
  int64_t first_id = cols.op_first_id[op];
  for (const c10::IValue& v : fn.outputs()) {
    each_tensor(v, [&](const at::Tensor& t) {
      // The same value when an op inside this one made it, or when it is one of this
      // op's inputs (in place, out=); else a new value (a TensorImpl address can be reused).
      const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
      auto it = live.find(impl);
      int64_t id = -1;
      if (it != live.end()) {
        if (it->second >= first_id) id = it->second;
        for (int64_t i = in_begin; id < 0 && i < in_end; ++i)
          if (cols.t_op[i] == op && cols.t_role[i] == 0 && cols.t_id[i] == it->second) id = it->second;
      }
      if (id < 0) {
        id = next_id++;
        live[impl] = id;
      }
      add_tensor(t, op, 1, id);
    });
  }
}

void reset() {
  for (PyObject* c : cols.frame_code) Py_DECREF(c);
  cols = Columns();
  live.clear();
  frame_index.clear();
  open_ops.clear();
  next_id = 1;
  current_scope = -1;
}

void start(int64_t frames, int64_t reserve) {
  reset();
  frames_mode = static_cast<int>(frames);
  for (auto* v : {&cols.op_name, &cols.op_parent, &cols.op_depth, &cols.op_scope, &cols.op_frame, &cols.op_user_frame})
    v->reserve(reserve);
  cols.op_tensor_begin.reserve(reserve);
  cols.op_first_id.reserve(reserve);
  cols.t_op.reserve(4 * reserve);
  cols.t_role.reserve(4 * reserve);
  cols.t_id.reserve(4 * reserve);
  cols.t_storage.reserve(4 * reserve);
  cols.t_dtype.reserve(4 * reserve);
  cols.t_shape_begin.reserve(4 * reserve);
  cols.shapes.reserve(16 * reserve);
  live.reserve(4 * reserve);
  handle = at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                     .needsInputs(true)
                                     .needsOutputs(true)
                                     .scopes({at::RecordScope::FUNCTION}));
}

void push_scope(int64_t key) {
  int32_t row = static_cast<int32_t>(cols.scope_key.size());
  cols.scope_key.push_back(key);
  cols.scope_parent.push_back(current_scope);
  current_scope = row;
}

void pop_scope() {
  if (current_scope >= 0) current_scope = cols.scope_parent[current_scope];
}

template <typename T>
torch::Tensor column(const std::vector<T>& v, at::ScalarType st) {
  auto out = torch::empty({static_cast<int64_t>(v.size())}, torch::dtype(st));
  if (!v.empty()) std::memcpy(out.data_ptr(), v.data(), v.size() * sizeof(T));
  return out;
}

py::dict stop() {
  if (handle) at::removeCallback(handle);
  handle = 0;
  py::dict d;
  d["names"] = names;
  d["op_name"] = column(cols.op_name, at::kInt);
  d["op_parent"] = column(cols.op_parent, at::kInt);
  d["op_depth"] = column(cols.op_depth, at::kInt);
  d["op_scope"] = column(cols.op_scope, at::kInt);
  d["op_frame"] = column(cols.op_frame, at::kInt);
  d["op_user_frame"] = column(cols.op_user_frame, at::kInt);
  d["op_tensor_begin"] = column(cols.op_tensor_begin, at::kLong);
  d["t_op"] = column(cols.t_op, at::kInt);
  d["t_role"] = column(cols.t_role, at::kChar);
  d["t_id"] = column(cols.t_id, at::kLong);
  d["t_storage"] = column(cols.t_storage, at::kLong);
  d["t_dtype"] = column(cols.t_dtype, at::kChar);
  d["t_shape_begin"] = column(cols.t_shape_begin, at::kLong);
  d["shapes"] = column(cols.shapes, at::kLong);
  d["scope_key"] = column(cols.scope_key, at::kLong);
  d["scope_parent"] = column(cols.scope_parent, at::kInt);
  py::list codes;
  for (PyObject* c : cols.frame_code) codes.append(py::reinterpret_borrow<py::object>(c));
  d["frame_code"] = codes;
  d["frame_lasti"] = column(cols.frame_lasti, at::kInt);
  return d;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("start", &start, "start recording (frames: -1 record nothing, 0 no frames, 1 innermost, 2 and first user frame)");
  m.def("stop", &stop, "stop recording; the columns");
  m.def("push_scope", &push_scope);
  m.def("pop_scope", &pop_scope);
}
"""


# --------------------------------------------------------------------------- the C++ recorder

def build_cpp(fresh: bool, build_dir: Path | None = None) -> tuple[object | None, str, Path]:
    """The C++ recorder, compiled (or loaded from its build folder), and what that cost."""
    from torch.utils.cpp_extension import load_inline

    if build_dir is None and fresh:
        build_dir = Path(tempfile.mkdtemp(prefix="tv-record-floor-"))
    elif build_dir is None:
        build_dir = Path.home() / ".cache" / "tensorviz-bench" / f"record_floor-torch{torch.__version__}"
        build_dir.mkdir(parents=True, exist_ok=True)
    marker = build_dir / "tv_source.sha256"
    digest = hashlib.sha256(CPP_SOURCE.encode()).hexdigest()
    had = marker.is_file() and marker.read_text() == digest
    w = time.perf_counter()
    try:
        ext = load_inline("tv_record_floor", cpp_sources=[CPP_SOURCE], extra_cflags=["-O2", "-DNDEBUG"],
                          build_directory=str(build_dir), verbose=False)
    except Exception as exc:  # noqa: BLE001 - no compiler here: say so and go on without it
        return None, f"C++ recorder not built: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", build_dir
    wall = time.perf_counter() - w
    marker.write_text(digest)
    # the compiler runs in child processes: their CPU is not this process's
    how = "loaded from its build folder (cached)" if had else "compiled (g++ through ninja) and loaded"
    return ext, f"C++ recorder {how} in {wall:.1f} s wall ({build_dir})", build_dir


_LOAD_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
import torch
import bench_torch_record_floor as b
from pathlib import Path
t = time.perf_counter()
b.build_cpp(False, Path(sys.argv[2]))
print(time.perf_counter() - t)
"""


def cached_load_seconds(build_dir: Path) -> float:
    """``load_inline`` of the built recorder in a fresh process (hash check, then dlopen)."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _LOAD_CHILD, str(Path(__file__).resolve().parent), str(build_dir)],
                          capture_output=True, text=True, check=False)
    try:
        return float(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return float("nan")


def cpp_record(ext, model, x, frames: int = 0, scopes: bool = False, reserve: int = 4096) -> dict:
    handles = []
    if scopes:
        mm = torch.nn.modules.module
        push, pop = ext.push_scope, ext.pop_scope
        handles = [mm.register_module_forward_pre_hook(lambda m, a: push(id(m))),
                   mm.register_module_forward_hook(lambda m, a, o: pop(), always_call=True)]
    ext.start(frames, reserve)
    try:
        model(x)
    finally:
        cols = ext.stop()
        for h in handles:
            h.remove()
    return cols


# --------------------------------------------------------------------------- Python floor

class RecordingDispatch(TorchDispatchMode):
    """The least a Python dispatch mode records for a graph: names, identities, shapes, dtypes."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # as capture.torch.trace chooses
        return "torch._dynamo" in sys.modules

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.ins: list[tuple] = []
        self.outs: list[tuple] = []
        self.meta: list[tuple] = []
        self.ids: dict[int, int] = {}
        self.keep: list = []  # every tensor seen stays alive: id() is never reused

    def _ident(self, t, fresh: bool) -> int:
        key = id(t)
        got = self.ids.get(key)
        if got is None or fresh:
            got = len(self.keep)
            self.ids[key] = got
            self.keep.append(t)
        self.meta.append((tuple(t.shape), t.dtype))
        return got

    def _tensors(self, values):
        for v in values:
            if isinstance(v, torch.Tensor):
                yield v
            elif isinstance(v, (list, tuple)):
                yield from (e for e in v if isinstance(e, torch.Tensor))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        ins = tuple(self._ident(t, False) for t in self._tensors((*args, *kwargs.values())))
        inputs = {id(t) for t in self._tensors((*args, *kwargs.values()))}
        outs = tuple(self._ident(t, id(t) not in inputs) for t in self._tensors((out,)))
        self.names.append(f"{func._schema.name}.{func._overloadname}")
        self.ins.append(ins)
        self.outs.append(outs)
        return out


def dispatch_record(model, x) -> RecordingDispatch:
    mode = RecordingDispatch()
    with mode:
        model(x)
    return mode


def function_mode(model, x):
    with btc._PassFunction():
        return model(x)


def dispatch_mode(model, x):
    with btc._PassDispatch():
        return model(x)


def module_hooks(model, x):
    mm = torch.nn.modules.module
    handles = [mm.register_module_forward_pre_hook(btc._no_hook),
               mm.register_module_forward_hook(btc._no_hook, always_call=True)]
    try:
        return model(x)
    finally:
        for h in handles:
            h.remove()


# --------------------------------------------------------------------------- torch.profiler

def profiler_run(model, x, **kw):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], **kw) as prof:
        model(x)
    return prof


def profiler_tree(model, x) -> list[tuple[str, tuple]]:
    """Profiler with tensor ids (profile_memory), its event tree read back: per op
    event, its name and its inputs' ids (no outputs: the profiler records none)."""
    prof = profiler_run(model, x, record_shapes=True, profile_memory=True)
    out = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        ins = getattr(e.extra_fields, "inputs", None)
        if ins is not None:
            out.append((e.name, tuple(getattr(i, "id", None) for i in ins)))
        stack.extend(e.children)
    return out


def execution_trace(model, x, read: bool):
    from torch.profiler import ExecutionTraceObserver

    fd, path = tempfile.mkstemp(suffix=".json", prefix="tv-et-")
    os.close(fd)
    et = ExecutionTraceObserver().register_callback(path)
    try:
        et.start()
        model(x)
        et.stop()
    finally:
        et.unregister_callback()
    try:
        if read:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        return None
    finally:
        os.unlink(path)


# --------------------------------------------------------------------------- op lists

_COMPOSITE: dict[str, bool] = {}


def composite(name: str) -> bool:
    """Whether an op decomposes above the Python key (a CompositeImplicitAutograd kernel),
    so a dispatch mode never sees it, only what it calls."""
    got = _COMPOSITE.get(name)
    if got is None:
        base = name[:-len(".default")] if name.endswith(".default") else name
        try:
            got = torch._C._dispatch_has_kernel_for_dispatch_key(base, "CompositeImplicitAutograd")
        except RuntimeError:
            got = False
        _COMPOSITE[name] = got
    return got


def visible(names: list[str], parents: list[int]) -> list[int]:
    """The events a dispatch mode would see: every op above is composite, and not itself."""
    shown, ok = [], {}
    for i, (name, parent) in enumerate(zip(names, parents)):
        above_ok = parent < 0 or (ok[parent] and composite(names[parent]))
        ok[i] = above_ok
        if above_ok and not composite(name):
            shown.append(i)
    return shown


def cpp_ops(cols: dict) -> list[tuple[str, tuple, tuple]]:
    names = [cols["names"][i] for i in cols["op_name"].tolist()]
    parents = cols["op_parent"].tolist()
    t_op, t_role, t_id = cols["t_op"].tolist(), cols["t_role"].tolist(), cols["t_id"].tolist()
    ins: dict[int, list[int]] = {}
    outs: dict[int, list[int]] = {}
    for op, role, ident in zip(t_op, t_role, t_id):
        (outs if role else ins).setdefault(op, []).append(ident)
    return [(names[i], tuple(ins.get(i, ())), tuple(outs.get(i, ()))) for i in visible(names, parents)]


def et_ops(trace: dict) -> tuple[list[tuple[str, tuple, tuple]], int]:
    """The execution trace's op nodes in call order (its ids grow with the call), filtered
    like the C++ events; tensor identity as ET gives it (tensor id, storage id)."""
    nodes = sorted((n for n in trace["nodes"] if not n["name"].startswith("[")), key=lambda n: n["id"])
    by_id = {n["id"]: n for n in nodes}
    names, parents = [], []
    index = {n["id"]: i for i, n in enumerate(nodes)}
    for n in nodes:
        schema = next((a["value"] for a in n.get("attrs", ()) if a["name"] == "op_schema"), "")
        full = schema.split("(")[0] if schema else n["name"]
        names.append(full if "." in full.split("::")[-1] else f"{full}.default")
        parent = by_id.get(n.get("ctrl_deps"))
        parents.append(index[parent["id"]] if parent is not None else -1)

    def tensors(values, types):
        out = []
        for v, t in zip(values, types):
            if t.startswith("Tensor(") and isinstance(v, list) and v:
                out.append((v[0], v[1]))
            elif t.startswith("GenericList[Tensor") and isinstance(v, list):
                out.extend((e[0], e[1]) for e in v if isinstance(e, list) and e)
        return tuple(out)

    shown = visible(names, parents)
    ops = [(names[i], tensors(nodes[i]["inputs"]["values"], nodes[i]["inputs"]["types"]),
            tensors(nodes[i]["outputs"]["values"], nodes[i]["outputs"]["types"])) for i in shown]
    return ops, len(nodes)


def edges(ops: list[tuple[str, tuple, tuple]]) -> list[tuple]:
    """Per op, its inputs' producers (op index, or -1 from outside)."""
    producer: dict = {}
    got = []
    for i, (_, ins, outs) in enumerate(ops):
        got.append(tuple(producer.get(v, -1) for v in ins))
        for v in outs:
            producer[v] = i
    return got


def compare(label: str, ref: list[tuple[str, tuple, tuple]], other: list[tuple[str, tuple, tuple]]) -> None:
    a, b = [o[0] for o in ref], [o[0] for o in other]
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    pairs_ab = {}
    for blk in matcher.get_matching_blocks():
        for k in range(blk.size):
            pairs_ab[blk.a + k] = blk.b + k
    only_ref = Counter(a[i] for i in range(len(a)) if i not in pairs_ab)
    matched_b = set(pairs_ab.values())
    only_other = Counter(b[j] for j in range(len(b)) if j not in matched_b)
    ea, eb = edges(ref), edges(other)
    kinds: Counter = Counter()
    for i, j in pairs_ab.items():
        mapped = tuple(pairs_ab.get(p, -2) if p >= 0 else -1 for p in ea[i])
        if mapped == eb[j]:
            kinds["equal"] += 1
        elif -2 in mapped or any(p >= 0 and p not in matched_b for p in eb[j]):
            kinds["a producer is an op only one side has"] += 1
        elif len(mapped) != len(eb[j]):
            kinds["a different number of tensor inputs"] += 1
        else:
            kinds["another producer"] += 1
    print(f"  {label}: {len(b)} ops vs the dispatch mode's {len(a)}; {len(pairs_ab)} in the same order; "
          f"inputs' producers of those: {dict(kinds)}")
    if only_ref:
        print(f"    only the dispatch mode: {dict(only_ref.most_common(8))}")
    if only_other:
        print(f"    only {label}: {dict(only_other.most_common(8))}")


def compare_lists(name: str, model, x, ext, with_et: bool) -> None:
    ref = dispatch_record(model, x)
    ref_ops = list(zip(ref.names, ref.ins, ref.outs))
    print(f"\n{name}: op lists against a TorchDispatchMode ({len(ref_ops)} ops)")
    if ext is not None:
        cols = cpp_record(ext, model, x)
        print(f"  (C++ callback: {len(cols['op_name'])} RecordFunction events, all depths)")
        compare("C++ RecordFunction, filtered", ref_ops, cpp_ops(cols))
    if with_et:
        ops, n_nodes = et_ops(execution_trace(model, x, True))
        print(f"  (execution trace: {n_nodes} op nodes, all depths)")
        compare("ExecutionTraceObserver, filtered", ref_ops, ops)


# --------------------------------------------------------------------------- the table

# mechanism key: (label, edges, frames, module scopes)
ROWS = {
    "dispatch": ("TorchDispatchMode, pass-through", "-", "-", "-"),
    "dispatch_rec": ("TorchDispatchMode, recording", "yes", "-", "-"),
    "function": ("TorchFunctionMode, pass-through", "-", "-", "-"),
    "hooks": ("global module hooks, no-op", "-", "-", "yes"),
    "prof_shapes": ("profiler record_shapes", "no ids", "-", "-"),
    "prof_ids": ("profiler +profile_memory +tree", "inputs", "-", "-"),
    "prof_stack": ("profiler +with_stack", "no ids", "yes", "-"),
    "prof_modules": ("profiler +with_stack +modules", "no ids", "yes", "yes"),
    "et": ("ExecutionTraceObserver", "yes*", "-", "-"),
    "et_read": ("ExecutionTraceObserver + read", "yes*", "-", "-"),
    "cpp_empty": ("C++ RF, callback records nothing", "-", "-", "-"),
    "cpp": ("C++ RecordFunction", "yes", "-", "-"),
    "cpp_frame": ("C++ RF + innermost frame", "yes", "inner", "-"),
    "cpp_user": ("C++ RF + user frame", "yes", "yes", "-"),
    "cpp_all": ("C++ RF + user frame + scopes", "yes", "yes", "yes"),
    "cpp_all_ops": ("  ... + op list in Python", "yes", "yes", "yes"),
}


def variants(model, x, ext, n_ops: int) -> dict:
    v = {
        "dispatch": lambda: dispatch_mode(model, x),
        "dispatch_rec": lambda: dispatch_record(model, x),
        "function": lambda: function_mode(model, x),
        "hooks": lambda: module_hooks(model, x),
        "prof_shapes": lambda: profiler_run(model, x, record_shapes=True),
        "prof_ids": lambda: profiler_tree(model, x),
        "prof_stack": lambda: profiler_run(model, x, record_shapes=True, with_stack=True),
        "prof_modules": lambda: profiler_run(model, x, record_shapes=True, with_stack=True, with_modules=True),
        "et": lambda: execution_trace(model, x, False),
        "et_read": lambda: execution_trace(model, x, True),
    }
    if ext is not None:
        reserve = 8 * n_ops
        v.update({
            "cpp_empty": lambda: cpp_record(ext, model, x, -1, False, reserve),
            "cpp": lambda: cpp_record(ext, model, x, 0, False, reserve),
            "cpp_frame": lambda: cpp_record(ext, model, x, 1, False, reserve),
            "cpp_user": lambda: cpp_record(ext, model, x, 2, False, reserve),
            "cpp_all": lambda: cpp_record(ext, model, x, 2, True, reserve),
            "cpp_all_ops": lambda: cpp_ops(cpp_record(ext, model, x, 2, True, reserve)),
        })
    return v


def verdict(ratio: float, per_op: float) -> str:
    off = ratio <= TARGET_OFF and per_op <= US_OFF
    on = ratio <= TARGET_ON and per_op <= US_ON
    return "both" if off else ("on only" if on else "-")


def print_table(results: list[tuple[str, int, float, dict, bool]]) -> None:
    names = [r[0] for r in results]
    print(f"\nmechanism alone: x plain (median of pairs) and us per graph op; 'fits': under both budgets "
          f"(off: <= {TARGET_OFF}x and <= {US_OFF:.0f} us/op), under the statistics-on one only, or neither")
    head = "".join(f"{n[:18]:>26}" for n in names)
    print(f"{'':34}{head}{'edges':>8}{'frames':>8}{'scopes':>8}")
    print(f"{'':34}" + "".join(f"{'x':>8}{'us/op':>8}{'fits':>10}" for _ in names))
    for key, (label, e, fr, sc) in ROWS.items():
        cells = ""
        present = False
        for _, n_ops, _, got, targeted in results:
            row = got.get(key)
            if row is None or row.get("error") or not row.get("ratios"):
                cells += f"{'n/a':>26}"
                continue
            present = True
            per_op = row["diff"] / n_ops * 1e6
            fits = verdict(row["ratio"], per_op) if targeted else ""
            cells += f"{row['ratio']:8.3f}{per_op:8.1f}{fits:>10}"
        if present:
            print(f"{label:34}{cells}{e:>8}{fr:>8}{sc:>8}")
    print("  ... + op list in Python: the row above, then its columns read into a dispatch mode's op list "
          "(the filter below, per op its name and input/output ids): a minimal graph build")
    print("  tiny ops: the targets are for the three models; this row is for the cost per op alone")
    print("  edges: yes = input and output identities; inputs = input ids only (outputs to be inferred from "
          "allocations); no ids = shapes only; yes* = ids are TensorImpl addresses' (reused after a free: "
          "(tensor, storage) pairs, see the comparison)")
    for name, n_ops, plain, got, _ in results:
        errors = {k: r["error"] for k, r in got.items() if r.get("error")}
        print(f"{name}: {n_ops} graph ops, plain forward {plain * 1e3:.1f} ms CPU"
              + (f"; failed: {errors}" if errors else ""))


def deep_stack(blocks: int) -> torch.nn.Module:
    """``bench_torch_capture``'s deep ``ModuleList`` of small blocks (layer norm, linear,
    GELU, add on [1, 8, 16]): ops so cheap that a mechanism's cost per op stands out of the
    noise of a shared machine, where 1 % of nanoGPT's forward is 6 us per op."""
    torch.manual_seed(0)
    return btc.DeepStack(blocks).eval()


# --------------------------------------------------------------------------- statistics calls

def stats_calls(repeat: int) -> None:
    from capture.torch import stats as stats_module

    t = torch.randn(16)
    big = torch.randn(256, 256)
    calls = {
        "torch.aminmax(t)": lambda: torch.aminmax(t),
        "torch.var_mean(t)": lambda: torch.var_mean(t),
        "t.sum()": lambda: t.sum(),
        "aminmax + sum + sum of squares, read back": lambda: (torch.aminmax(t), t.sum(), t.square().sum()) and
        torch.stack([*torch.aminmax(t), t.sum(), t.square().sum()]).tolist(),
        "TensorViz stats_now(t)": lambda: stats_module.stats_now(t),
        "TensorViz stats_now(256x256)": lambda: stats_module.stats_now(big),
    }
    n = 2000
    print(f"\nstatistics: fixed CPU cost per call at one thread, tiny tensor [16] float32 (best of {repeat} x {n} calls)")
    for label, fn in calls.items():
        best = min(btc.cpu_of(lambda: [fn() for _ in range(n)])[0] for _ in range(repeat))
        print(f"  {label:44}{best / n * 1e6:8.2f} us")


# --------------------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nanogpt", default="", help="nanoGPT's model.py (read at run time; skipped when not given)")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--repeat", type=int, default=5, help="A/B pairs per mechanism and model")
    ap.add_argument("--only", default="", help="comma-separated: nanogpt,llama,resnet50,deep (default: all)")
    ap.add_argument("--blocks", type=int, default=200, help="deep: blocks of the tiny-op model (about 10 ops each)")
    ap.add_argument("--no-cpp", action="store_true", help="skip the C++ RecordFunction recorder")
    ap.add_argument("--fresh-build", action="store_true", help="compile the C++ recorder in a new folder (first-build time)")
    ap.add_argument("--no-compare", action="store_true", help="skip the op-list comparison")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread; {btc.load_line()}")
    ext = None
    if not args.no_cpp:
        ext, note, build_dir = build_cpp(args.fresh_build)
        print(note)
        if ext is not None:
            print(f"C++ recorder: loaded from its build folder in a new process (torch already imported): "
                  f"{cached_load_seconds(build_dir) * 1e3:.0f} ms wall")
    print(f"CPU time in A/B-interleaved pairs, {args.repeat} pairs per mechanism; batch 1")
    results = []
    models = [(name, build, make_input, args.repeat) for name, build, make_input, _ in btc.suite_models(args)]
    if not args.only or "deep" in args.only.split(","):
        models.append((f"tiny ops, {args.blocks} blocks", lambda: deep_stack(args.blocks),
                       lambda b: torch.randn(b, 8, 16), 3 * args.repeat))  # per-op cost only: no targets
    for name, build, make_input, repeat in models:
        model, x = build(), make_input(1)
        with torch.no_grad():
            model(x)  # the first forward in a process pays kernel set-up
            n_ops = len(dispatch_record(model, x).names)
            fns = variants(model, x, ext, n_ops)
            for fn in fns.values():  # each mechanism's own first-use set-up, outside the pairs
                fn()
            got = btc.pairs(lambda: model(x), fns, repeat)
            plain = statistics.median(p for row in got.values() for p in row.get("plain", []))
            results.append((name, n_ops, plain, got, not name.startswith("tiny")))
            print(f"{name}: done ({btc.load_line()})", flush=True)
            if not args.no_compare:
                compare_lists(name, model, x, ext, with_et=name.startswith("Llama"))
    print_table(results)
    stats_calls(args.repeat)
    print(f"after: {btc.load_line()}")


if __name__ == "__main__":
    main()
