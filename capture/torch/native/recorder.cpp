// TensorViz's native Torch recorder: a RecordFunction callback of the recording thread,
// recording the ops a TorchDispatchMode would see (capture.torch.trace's _Mode), with the same value identity,
// versions, storages, literals, frames and activation statistics, into C++ columns that
// flush() turns into the trace's Value / Node / Operand objects. See capture/torch/native/.
#include <torch/extension.h>
#include <ATen/record_function.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/SmallVector.h>
#include <c10/util/flat_hash_map.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/DynamicTypes.h>
#include <Python.h>
#include <frameobject.h>
#include <algorithm>
#include <exception>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

using TensorWeak = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
// Per-row lists kept inline (no allocation of their own for the usual sizes): the rows live
// while the model runs, and thousands of small blocks scattered among its activations
// fragment the heap (the next forward's activations fault in fresh pages).
using Ints = c10::SmallVector<int64_t, 6>;
using Extras = c10::SmallVector<std::pair<int8_t, int64_t>, 2>;
constexpr int64_t kNone = std::numeric_limits<int64_t>::min();  // a version not yet read

// How a literal argument is turned into Python (the arg's schema type).
enum ArgKind : int8_t { kGeneric = 0, kDtype = 1, kLayout = 2, kMemFormat = 3 };

struct OpInfo {
  std::string name;           // aten::add.Tensor (".default" dropped)
  bool composite = false;     // CompositeImplicitAutograd: decomposes above a dispatch mode
  bool invisible = false;     // never reaches a dispatch mode (nor what it calls)
  const c10::FunctionSchema* schema = nullptr;
  std::vector<int> written;   // argument positions the schema marks as written
  std::vector<int8_t> kinds;  // per argument, its ArgKind
  int keep_args = -1;         // only this many arguments (a renamed op), -1 all
  PyObject* py_name = nullptr;
};

struct Literal {
  c10::IValue v;
  int8_t kind;
  int32_t ints = -1;  // an int list: its items at Recorder::literal_ints[ints...], v None
  int32_t n_ints = 0;
};

struct OperandRow {
  int32_t position;
  int64_t value;    // -1: a literal
  int32_t literal;  // index into literals, -1: none (value)
};

struct NodeRow {
  int32_t op;
  int64_t group;
  int64_t frame;  // resolved frame id, or -1
  c10::SmallVector<OperandRow, 4> inputs;
  c10::SmallVector<int64_t, 2> outputs;
  int32_t result = -1;  // literal index of a non-tensor result
  // while the op runs (the boxed inputs are gone at its end): its first argument when a
  // tensor and that operand's value, and the tensors it writes
  at::Tensor first;
  int64_t first_vid = -1;
  c10::SmallVector<at::Tensor, 1> written;
};

struct LiveEntry {
  TensorWeak ref;
  int64_t version;
  int64_t vid;
};

struct StorageEntry {
  int64_t sid;
  c10::SmallVector<TensorWeak, 2> refs;
};

struct ValueRow {
  Ints shape;
  int8_t dtype;
  Ints strides;
  int64_t offset;
  int64_t bytes;
  bool strided;
  std::string layout;
  // extra keys in order: kind code and an int or string
  Extras extra;  // codes below
  // a param, buffer, input or other label: its (kind, name) entry in Recorder::labels
  // (never erased), not a copy; a string made here would sit among the activations
  const std::pair<std::string, std::string>* label = nullptr;
  int64_t storage;
  std::string device;  // empty: "cpu"
};
// extra codes
enum Extra : int8_t { kVersionOf, kWrittenBy, kChangedOutside, kParam, kBuffer, kInput, kExternal, kRequiresGrad,
                      kOtherLabel };

struct Stats {
  double mn, mx, mean, sd;
  int64_t nan, inf;
  bool masked;   // NaN/Inf present: the key order nan, inf, min, max, mean, std
  bool none;     // nothing finite: min..std None
};

// Per value: 0 no statistics known, 1 measured here (stats row), 2 known by Python's
// ActivationStatistics (a value made before recording, or a parameter waiting for later),
// 3 shares a value measured here.
struct StatState {
  int8_t state = 0;
  int64_t ref = -1;  // row in stats (1) or the value shared (3)
};

struct Frame {
  PyFrameObject* stop = nullptr;
  int64_t stop_fid = -1;
  bool stop_lib = false;
};

class Recorder;
Recorder* active = nullptr;
thread_local bool tl_owner = false;
// Set while the recorder's own work runs (OwnCalls).
thread_local bool tl_inside = false;

// The recorder's own work: a callback (on_start, on_end), and its tensor calls outside one
// (statistics, a wrapped number's value, a value looked up from Python). The tensor calls
// made there (and Python's, from its callbacks) are not events. A flag rather than a
// RecordFunctionGuard: switching RecordFunction off and on rebuilds the thread's active
// callbacks each time (~3% of a small model's capture, two guards per event); such calls
// are rare and only boxed. Put back as it was: these nest.
struct OwnCalls {
  bool was;
  OwnCalls() : was(tl_inside) { tl_inside = true; }
  ~OwnCalls() { tl_inside = was; }
};
at::CallbackHandle handle = 0;

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn);
void on_end(const at::RecordFunction& fn, at::ObserverContext*);

template <typename T>
void moments(const T* p, int64_t n, double* out) {
  double lo = INFINITY, hi = -INFINITY, s = 0.0, q = 0.0;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    double v = static_cast<double>(p[i]);
    if (v != v) { nan = true; continue; }
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    s += v;
    q += v * v;
  }
  if (nan) lo = hi = NAN;
  out[0] = lo; out[1] = hi; out[2] = s; out[3] = q;
}

typedef float v8f __attribute__((vector_size(32)));

// Min, max, sum and sum of squares of n floats in one pass: 2 x 8 lanes over chunks of 1024,
// each chunk's sums added in double. Compiled twice (AVX2 and the baseline), picked at load
// time by the CPU (GCC's target_clones): the build stays portable.
__attribute__((target_clones("avx2", "default")))
void moments_f32(const float* p, int64_t n, double* out) {
  v8f mn0, mn1, mx0, mx1;
  for (int l = 0; l < 8; ++l) { mn0[l] = INFINITY; mx0[l] = -INFINITY; }
  mn1 = mn0;
  mx1 = mx0;
  double s = 0.0, q = 0.0;
  int64_t i = 0;
  for (; i + 1024 <= n; i += 1024) {
    v8f s0 = {0, 0, 0, 0, 0, 0, 0, 0}, s1 = s0, q0 = s0, q1 = s0;
    for (int64_t j = 0; j < 1024; j += 16) {
      v8f a, b;
      std::memcpy(&a, p + i + j, sizeof a);
      std::memcpy(&b, p + i + j + 8, sizeof b);
      mn0 = a < mn0 ? a : mn0;
      mn1 = b < mn1 ? b : mn1;
      mx0 = a > mx0 ? a : mx0;
      mx1 = b > mx1 ? b : mx1;
      s0 += a;
      s1 += b;
      q0 += a * a;
      q1 += b * b;
    }
    for (int l = 0; l < 8; ++l) {
      s += static_cast<double>(s0[l]) + static_cast<double>(s1[l]);
      q += static_cast<double>(q0[l]) + static_cast<double>(q1[l]);
    }
  }
  float lo = INFINITY, hi = -INFINITY;
  for (int l = 0; l < 8; ++l) {
    lo = std::fmin(lo, std::fmin(mn0[l], mn1[l]));
    hi = std::fmax(hi, std::fmax(mx0[l], mx1[l]));
  }
  for (; i < n; ++i) {
    float v = p[i];
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    s += v;
    q += static_cast<double>(v) * v;
  }
  // A NaN anywhere makes the sum NaN (the vector min/max skip it): min and max then NaN.
  if (s != s) { lo = hi = NAN; }
  out[0] = lo; out[1] = hi; out[2] = s; out[3] = q;
}

bool finite(double x) { return std::isfinite(x); }

// Graph objects (a Value, Node, Operand or Group, and the lists and dicts made for them
// here) hold data only and never take part in a reference cycle: they are taken off the
// cyclic collector's lists as they are made. Otherwise the young collection the trace runs
// every CHECKPOINT_OPS ops walked every one of them made so far (GC is paused while
// recording, so they all sit in the youngest generation): ~125,000 objects at 8,192 ops,
// 30-90 ms, and ~200 ms of a 10,000-op capture's CPU time with statistics on. Reference
// counting still frees them; a dict a later pass fills with a container is tracked again
// by CPython itself.
inline PyObject* untracked(PyObject* o) {
  if (o && PyObject_GC_IsTracked(o)) PyObject_GC_UnTrack(o);
  return o;
}

// A slotted dataclass of capture.graph.model (Value, Node, Operand) made by filling its
// slots straight from C++ rather than through its generated __init__ (a Python frame per
// object, three quarters of each object's cost: ~1 us a Node, 0.7 us an Operand, a few
// thousand per capture). Every field is given, in the dataclass's field order; a class
// with a __post_init__, or a field that is not a slot, is called as usual instead.
struct Maker {
  py::object cls;
  std::vector<py::object> slots;  // member descriptors, in field order
  bool fast = false;

  void init(py::object c) {
    cls = c;
    py::module_ dc = py::module_::import("dataclasses");
    fast = !py::hasattr(c, "__post_init__");
    for (py::handle f : dc.attr("fields")(c)) {
      py::object d = c.attr(f.attr("name"));
      if (Py_TYPE(d.ptr()) != &PyMemberDescr_Type) fast = false;
      slots.push_back(d);
    }
  }

  PyObject* make(PyObject** args, size_t n) {
    if (n != slots.size()) throw std::runtime_error("a graph object made with the wrong number of fields");
    if (!fast) {
      PyObject* got = PyObject_Vectorcall(cls.ptr(), args, n, nullptr);
      if (!got) throw py::error_already_set();
      return untracked(got);
    }
    PyTypeObject* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
    PyObject* o = type->tp_alloc(type, 0);
    if (!o) throw py::error_already_set();
    for (size_t i = 0; i < n; ++i) {
      PyObject* d = slots[i].ptr();
      if (Py_TYPE(d)->tp_descr_set(d, o, args[i]) < 0) {
        Py_DECREF(o);
        throw py::error_already_set();
      }
    }
    return untracked(o);
  }
};

class Recorder {
 public:
  // configuration
  Maker value_cls, node_cls, operand_cls, frame_cls;
  py::object code_kind_cb, before_write_cb;
  py::object frame_ids, frame_list;  // the builder's (GraphBuilder._frame_ids, .frames)
  int64_t max_ops, max_values;
  bool stats_on, params_later;
  PyObject* outer = nullptr;

  // state
  std::unordered_map<const c10::OperatorHandle*, int32_t> op_index;
  std::unordered_map<std::string, int32_t> op_by_name;
  std::vector<OpInfo> ops;
  ska::flat_hash_map<const c10::TensorImpl*, LiveEntry> live;
  std::unordered_map<const c10::TensorImpl*, std::pair<std::string, std::string>> labels;
  std::vector<at::Tensor> label_keep;
  ska::flat_hash_map<const void*, StorageEntry> storages;
  int64_t n_storages = 0;
  std::vector<int64_t> value_storage, producer, born;
  std::vector<bool> owns_storage;
  std::unordered_map<int64_t, int64_t> storage_writer;
  std::vector<ValueRow> values;  // rows not yet flushed (values_base + i)
  int64_t values_base = 0, n_values = 0;
  std::vector<NodeRow> nodes;  // rows not yet flushed
  int64_t nodes_base = 0, n_nodes = 0;
  std::vector<std::pair<int64_t, int64_t>> late_outputs;  // (node, value) appended to a node's outputs
  std::vector<Literal> literals;
  std::vector<int64_t> literal_ints;  // the int lists of literals (see add_literal)
  std::vector<StatState> stat_state;  // per value id (all values)
  std::vector<Stats> stats;
  std::vector<PyObject*> stats_py;  // per stats row, its dict once made
  std::vector<std::pair<int64_t, int64_t>> py_shares;  // statistics.share(vid, src) at flush
  std::vector<std::tuple<int64_t, at::Tensor, int64_t>> later_new;  // statistics.later at flush
  ska::flat_hash_map<int64_t, c10::SmallVector<std::pair<int64_t, at::Tensor>, 1>> later_waiting;  // sid -> not yet handed
  ska::flat_hash_set<int64_t> later_handed;  // sids with values waiting in Python
  int64_t skipped = 0;
  std::unordered_map<int8_t, PyObject*> dtype_names;
  std::unordered_map<int8_t, std::string> dtype_str;
  // frames
  std::unordered_map<PyObject*, int8_t> code_kind;  // 0 neither, 1 workspace, 2 library
  std::unordered_map<PyObject*, PyObject*> code_path;
  std::unordered_map<PyObject*, PyObject*> code_positions;  // its co_positions() as a list
  std::unordered_map<uint64_t, int64_t> addr_frame;
  Frame top;
  int64_t group = -1;
  // the open events of this thread
  struct Open {
    int32_t node;  // row index (absolute node id) or -1
    bool children_visible;
    bool paused;
  };
  std::vector<Open> open;
  int64_t top_frame = -2;  // the frame id of the open top-level event (-2: not computed)
  PyFrameObject* top_pyframe = nullptr;
  int paused = 0;
  bool rf_off = false;  // RecordFunction switched off inside an event whose callees are no graph ops
  // the first limit reached
  bool failed = false;
  std::string fail_kind, fail_what;
  int64_t fail_limit = 0, fail_got = 0;
  std::string error;  // an unexpected error inside the callback
  // Three int64s shared with Python without a call (an array.array it owns; the buffer
  // view held here keeps it alive and unresizable): [0] the node count recorded so far
  // (flushed or not), [1] nonzero when a flush has more for Python than rows that cannot
  // wait (a limit reached, an error, late outputs), [2] the node count of the next
  // checkpoint (NativeRecording.next_checkpoint, written by Python). The function mode
  // reads them around every torch call instead of flushing.
  //
  // Statistics hand-overs (parameters measured after the graph, views sharing the
  // statistics of a value Python measures) do not ask for a flush: they wait for the next
  // one made for another reason, or the last. A write to a parameter's storage before
  // then is measured here (before_write), as the Python path measures it before the
  // write. Asking for one made a sync, in Python, after each module that first read its
  // parameters (163 per ResNet-50 capture, 12 ms of it) and sent those calls' function
  // groups to Python.
  int64_t* state = nullptr;
  std::unique_ptr<py::buffer_info> state_view;

  void note() {
    if (state == nullptr) return;
    state[0] = n_nodes;
    state[1] = (failed || !error.empty() || !late_outputs.empty()) ? 1 : 0;
  }

  // Room for a typical model's tables before its forward runs: grown while it runs, each
  // table's old block would be freed among the activations (see Ints).
  void reserve() {
    constexpr size_t kValues = 4096;
    live.reserve(kValues);
    storages.reserve(kValues);
    for (auto* v : {&value_storage, &producer, &born}) v->reserve(v->size() + kValues);
    owns_storage.reserve(owns_storage.size() + kValues);
    stat_state.reserve(stat_state.size() + kValues);
    values.reserve(1024);
    nodes.reserve(1024);
    pending.reserve(64);
    open.reserve(64);
    literals.reserve(1024);
    literal_ints.reserve(4096);
    late_outputs.reserve(64);
    if (stats_on) {
      stats.reserve(stats.size() + kValues);
      stats_py.reserve(stats_py.size() + kValues);
      py_shares.reserve(1024);
      later_new.reserve(1024);
      later_waiting.reserve(1024);
      later_handed.reserve(1024);
    }
  }

  ~Recorder() {
    for (auto& kv : code_kind) Py_DECREF(kv.first);
    for (auto& kv : code_path) Py_XDECREF(kv.second);
    for (auto& kv : code_positions) Py_XDECREF(kv.second);
    for (auto& kv : dtype_names) Py_XDECREF(kv.second);
    for (PyObject* o : stats_py) Py_XDECREF(o);
    for (auto& op : ops) Py_XDECREF(op.py_name);
  }

  // ------------------------------------------------------------ ops

  std::unordered_map<const char*, int32_t> op_by_ptr;

  int32_t op_of(const at::RecordFunction& fn) {
    const char* key_ptr = fn.name();
    auto hit = op_by_ptr.find(key_ptr);
    if (hit != op_by_ptr.end()) return hit->second;
    int32_t got = op_of_slow(fn);
    if (got >= 0) op_by_ptr.emplace(key_ptr, got);
    return got;
  }

  int32_t op_of_slow(const at::RecordFunction& fn) {
    auto opname = fn.operator_name();
    if (!opname) return -1;
    auto h = c10::Dispatcher::singleton().findOp(*opname);
    if (!h) return -1;
    // keyed by the handle's operatorDef address (stable while the op is registered)
    std::string key = opname->name + "." + opname->overload_name;
    auto it = op_by_name.find(key);
    if (it != op_by_name.end()) return it->second;
    OpInfo info;
    info.name = opname->name;
    if (!opname->overload_name.empty() && opname->overload_name != "default") info.name += "." + opname->overload_name;
    info.composite = h->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
    info.schema = &h->schema();
    const auto& args = info.schema->arguments();
    for (size_t i = 0; i < args.size(); ++i) {
      const auto& a = args[i];
      if (a.alias_info() && a.alias_info()->isWrite()) info.written.push_back(static_cast<int>(i));
      auto t = a.real_type();
      if (auto o = t->cast<c10::OptionalType>()) t = o->getElementType();
      int8_t kind = kGeneric;
      if (t->kind() == c10::TypeKind::ScalarTypeType) kind = kDtype;
      else if (t->kind() == c10::TypeKind::LayoutType) kind = kLayout;
      else if (t->kind() == c10::TypeKind::MemoryFormatType) kind = kMemFormat;
      info.kinds.push_back(kind);
    }
    // Ops whose autograd kernel never redispatches below it: a dispatch mode never sees them.
    static const std::unordered_set<std::string> autograd_only = {
        "aten::detach_", "aten::requires_grad_", "aten::retain_grad", "aten::retains_grad", "aten::set_data",
        "aten::_backward", "aten::is_leaf", "aten::output_nr", "aten::_version", "aten::_fw_primal"};
    if (autograd_only.count(info.name)) info.invisible = true;
    if (info.name == "aten::_reshape_alias") {
      // A dispatch mode makes reshape decompose to view (isTensorSubclassLike): the same
      // alias, named as that mode sees it, without the strides argument.
      info.name = "aten::view";
      info.keep_args = 2;
    }
    int32_t i = static_cast<int32_t>(ops.size());
    ops.push_back(std::move(info));
    op_by_name.emplace(key, i);
    return i;
  }

  PyObject* op_py_name(int32_t i) {
    auto& info = ops[i];
    if (!info.py_name) info.py_name = PyUnicode_FromString(info.name.c_str());
    return info.py_name;
  }

  // ------------------------------------------------------------ values

  bool is_value(const at::Tensor& t) const {
    return t.defined() && !t.unsafeGetTensorImpl()->is_wrapped_number();
  }

  static int64_t version_of(const at::Tensor& t) {
    return static_cast<int64_t>(t.unsafeGetTensorImpl()->version_counter().current_version());
  }

  void fail(const char* kind, int64_t limit, int64_t got, const char* what) {
    if (failed) return;
    failed = true;
    fail_kind = kind;
    fail_limit = limit;
    fail_got = got;
    fail_what = what;
  }

  int64_t storage_of(const at::Tensor& t, int64_t vid) {
    const void* key = t.has_storage() ? static_cast<const void*>(t.storage().unsafeGetStorageImpl()) : nullptr;
    if (key) {
      auto it = storages.find(key);
      if (it != storages.end()) {
        auto& refs = it->second.refs;
        size_t k = 0;
        while (k < refs.size() && refs[k].expired()) ++k;
        if (k) refs.erase(refs.begin(), refs.begin() + k);
        if (!refs.empty()) {
          refs.emplace_back(t.getIntrusivePtr());
          value_storage.push_back(it->second.sid);
          owns_storage.push_back(false);
          return it->second.sid;
        }
      }
    }
    int64_t sid = n_storages++;
    if (key) {
      StorageEntry e{sid, {}};
      e.refs.emplace_back(t.getIntrusivePtr());
      storages[key] = std::move(e);
    }
    value_storage.push_back(sid);
    owns_storage.push_back(true);
    (void)vid;
    return sid;
  }

  // A new value of tensor t (-1: failed at the values limit).
  int64_t new_value(const at::Tensor& t, int64_t prod, Extras&& extra,
                    int64_t version, const std::pair<std::string, std::string>* label = nullptr) {
    int64_t vid = n_values;
    if (vid >= max_values) {
      fail("max_values", max_values, vid + 1, "");
      return -1;
    }
    ValueRow row;
    auto sizes = t.sizes();
    row.shape.assign(sizes.begin(), sizes.end());
    row.dtype = static_cast<int8_t>(t.scalar_type());
    if (!t.device().is_cpu()) row.device = t.device().str();
    row.strided = t.layout() == c10::kStrided;
    if (row.strided) {
      auto st = t.strides();
      row.strides.assign(st.begin(), st.end());
      row.offset = t.storage_offset();
      row.bytes = t.nbytes();
    } else {
      row.offset = 0;
      row.layout = layout_name(t.layout());
      row.bytes = t.numel() * static_cast<int64_t>(t.element_size());
    }
    row.extra = std::move(extra);
    row.label = label;
    ensure_dtype(t);
    values.push_back(std::move(row));
    ++n_values;
    stat_state.emplace_back();
    values.back().storage = storage_of(t, vid);
    if (prod < 0) {
      producer.push_back(-1);
      born.push_back(n_nodes);
    } else {
      producer.push_back(prod);
      born.push_back(prod + 1);
    }
    live.insert_or_assign(t.unsafeGetTensorImpl(), LiveEntry{TensorWeak(t.getIntrusivePtr()), version, vid});
    if (live.size() >= purge_at) purge_dead();
    return vid;
  }

  // A weak reference keeps its TensorImpl (not the data) allocated: one kept for every
  // value ever made pins a small block beside each freed activation on the heap, so the
  // next forward's activations cannot reuse that memory and fault in fresh pages (~3,000
  // page faults per ResNet-50 capture, a few ms). Entries of dead tensors can never be
  // looked up again (every lookup treats them as absent, a storage whose tensors all died
  // gets a new id), so they are dropped once the map has doubled since the last purge.
  size_t purge_at = 256;

  void purge_dead() {
    for (auto it = live.begin(); it != live.end();) {
      if (it->second.ref.expired()) it = live.erase(it);
      else ++it;
    }
    for (auto it = storages.begin(); it != storages.end();) {
      auto& refs = it->second.refs;
      refs.erase(std::remove_if(refs.begin(), refs.end(), [](const TensorWeak& r) { return r.expired(); }), refs.end());
      if (refs.empty()) it = storages.erase(it);
      else ++it;
    }
    purge_at = std::max<size_t>(256, 2 * live.size());
  }

  void ensure_dtype(const at::Tensor& t) { ensure_dtype(t.scalar_type()); }

  void ensure_dtype(at::ScalarType type) {
    auto st = static_cast<int8_t>(type);
    if (dtype_str.count(st)) return;
    // torch's own name: str(dtype) without "torch."
    PyGILState_STATE g = PyGILState_Ensure();
    std::string s = py::str(reinterpret_cast<PyObject*>(torch::getTHPDtype(type)));
    if (s.rfind("torch.", 0) == 0) s = s.substr(6);
    dtype_str[st] = s;
    dtype_names[st] = PyUnicode_FromString(s.c_str());
    PyGILState_Release(g);
  }

  bool floating(const at::Tensor& t) const { return at::isFloatingType(t.scalar_type()); }

  int64_t value_of(const at::Tensor& t) {
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    auto it = live.find(impl);
    if (it != live.end() && !it->second.ref.expired()) {
      int64_t vid = it->second.vid;
      int64_t version = it->second.version;
      int64_t cur = version_of(t);
      if (version == kNone || version != cur) {
        auto w = storage_writer.find(value_storage[vid]);
        int64_t writer = w == storage_writer.end() ? -1 : w->second;
        if (writer >= born[vid]) {
          int64_t nv = new_value(t, writer, {{kVersionOf, vid}, {kWrittenBy, writer}}, cur);
          if (nv < 0) return -1;
          late_outputs.emplace_back(writer, nv);
          if (stats_on && floating(t)) measure(nv, t);
          return nv;
        }
        if (version != kNone) return new_value(t, -1, {{kVersionOf, vid}, {kChangedOutside, 1}}, cur);
        it->second.version = cur;
      }
      return vid;
    }
    auto lab = labels.find(impl);
    Extras extra;
    const std::pair<std::string, std::string>* label = nullptr;
    int8_t kind = -1;
    if (lab != labels.end()) {
      const std::string& k = lab->second.first;
      kind = k == "param" ? kParam : k == "buffer" ? kBuffer : k == "input" ? kInput : kOtherLabel;
      extra.emplace_back(kind, 0);
      label = &lab->second;
    } else {
      extra.emplace_back(kExternal, 1);
    }
    if (t.requires_grad()) extra.emplace_back(kRequiresGrad, 1);
    int64_t vid = new_value(t, -1, std::move(extra), version_of(t), label);
    if (vid < 0) return -1;
    if (stats_on && floating(t)) {
      if (kind == kParam && params_later) later(vid, t);
      else measure(vid, t);
    }
    return vid;
  }

  // ------------------------------------------------------------ statistics

  void later(int64_t vid, const at::Tensor& t) {
    if (t.numel() == 0) return;
    stat_state[vid].state = 2;
    later_new.emplace_back(vid, t, value_storage[vid]);  // Python detaches it when it measures it
    later_waiting[value_storage[vid]].emplace_back(vid, t);
  }

  void measure(int64_t vid, const at::Tensor& t) {
    int64_t n = t.numel();
    if (n == 0) return;
    if (!t.device().is_cpu()) {
      ++skipped;
      return;
    }
    OwnCalls own;
    c10::impl::ExcludeDispatchKeyGuard no_autograd(c10::autograd_dispatch_keyset_with_ADInplaceOrView);
    Stats s{};
    try {
      stats_of(t, s);
    } catch (const std::exception&) {
      ++skipped;
      return;
    }
    stat_state[vid].state = 1;
    stat_state[vid].ref = static_cast<int64_t>(stats.size());
    stats.push_back(s);
    stats_py.push_back(nullptr);
  }

  void stats_of(const at::Tensor& t0, Stats& s) {
    at::Tensor t = t0;
    if (t.is_neg() || t.is_conj()) t = t.resolve_neg().resolve_conj();
    auto st = t.scalar_type();
    at::Tensor c = t.is_contiguous() ? t : dense_or_copy(t);
    if (st != at::kFloat && st != at::kDouble && st != at::kBFloat16 && st != at::kHalf) {
      c = c.to(at::kFloat);
      st = at::kFloat;
    }
    int64_t n = c.numel();
    double m[4];
    if (st == at::kFloat) moments_f32(c.const_data_ptr<float>(), n, m);
    else if (st == at::kDouble) moments(c.const_data_ptr<double>(), n, m);
    else if (st == at::kBFloat16) moments(c.const_data_ptr<at::BFloat16>(), n, m);
    else moments(c.const_data_ptr<at::Half>(), n, m);
    if (!(finite(m[0]) && finite(m[1]))) {
      if (st == at::kFloat) masked_loop(c.const_data_ptr<float>(), n, s);
      else if (st == at::kDouble) masked_loop(c.const_data_ptr<double>(), n, s);
      else if (st == at::kBFloat16) masked_loop(c.const_data_ptr<at::BFloat16>(), n, s);
      else masked_loop(c.const_data_ptr<at::Half>(), n, s);
      return;
    }
    summary(c, n, m, s);
  }

  at::Tensor dense_or_copy(const at::Tensor& t) {
    // the elements as one dense run when they fill a block (a permutation), else a copy
    std::vector<std::pair<int64_t, int64_t>> dims;
    for (int64_t d = 0; d < t.dim(); ++d)
      if (t.size(d) != 1) dims.emplace_back(t.stride(d), t.size(d));
    std::sort(dims.begin(), dims.end());
    int64_t expected = 1;
    bool dense = true;
    for (auto& p : dims) {
      if (p.first != expected) { dense = false; break; }
      expected *= p.second;
    }
    if (dense) return t.as_strided({t.numel()}, {1}, t.storage_offset());
    return t.contiguous();
  }

  void summary(const at::Tensor& c, int64_t n, const double* m, Stats& s) {
    s.masked = false;
    s.none = false;
    s.nan = s.inf = 0;
    s.mn = m[0];
    s.mx = m[1];
    if (m[0] == m[1]) {
      s.mean = m[0];
      s.sd = 0.0;
      return;
    }
    double mean = m[2] / n, var = m[3] / n - mean * mean;
    if (!finite(mean) || !finite(var)) {  // float32 overflow: again in float64
      double m2[4];
      at::Tensor d = c.to(at::kDouble).contiguous();
      moments(d.const_data_ptr<double>(), n, m2);
      mean = m2[2] / n;
      var = m2[3] / n - mean * mean;
    }
    s.mean = mean;
    if (var < 1e-4 * mean * mean) {  // cancellation: the exact two-pass value, as stats.py
      s.sd = n > 1 ? at::std(c.to(at::kDouble), c10::nullopt, /*correction=*/0).item<double>() : 0.0;
    } else {
      s.sd = std::sqrt(var);
    }
  }

  // NaN/Inf present: counted, then the statistics of the finite elements in float64 (one
  // pass, and a second for the spread where one pass would cancel).
  template <typename T>
  static void masked_loop(const T* p, int64_t n, Stats& s) {
    int64_t nan = 0, inf = 0, nf = 0;
    double lo = INFINITY, hi = -INFINITY, sum = 0.0, sq = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      double v = static_cast<double>(p[i]);
      if (v != v) { ++nan; continue; }
      if (v == INFINITY || v == -INFINITY) { ++inf; continue; }
      ++nf;
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
      sum += v;
      sq += v * v;
    }
    s.masked = true;
    s.nan = nan;
    s.inf = inf;
    s.none = nf == 0;
    if (s.none) return;
    double mean = sum / nf, var = sq / nf - mean * mean;
    if (var < 1e-4 * mean * mean) {
      double acc = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        double v = static_cast<double>(p[i]);
        if (v == v && v != INFINITY && v != -INFINITY) acc += (v - mean) * (v - mean);
      }
      var = acc / nf;
    }
    s.mn = lo;
    s.mx = hi;
    s.mean = mean;
    s.sd = std::sqrt(var > 0 ? var : 0.0);
  }

  void masked(const at::Tensor& c, Stats& s) {
    at::Tensor x = c.scalar_type() == at::kDouble ? c : c.to(at::kFloat);
    int64_t n = x.numel();
    int64_t nan = at::isnan(x).sum().item<int64_t>();
    at::Tensor fin = at::isfinite(x);
    int64_t nf = fin.sum().item<int64_t>();
    s.masked = true;
    s.nan = nan;
    s.inf = n - nf - nan;
    if (nf) {
      at::Tensor xf = x.index({fin}).to(at::kDouble);
      s.none = false;
      s.mn = xf.min().item<double>();
      s.mx = xf.max().item<double>();
      s.mean = xf.mean().item<double>();
      s.sd = at::std(xf, c10::nullopt, 0).item<double>();
    } else {
      s.none = true;
    }
  }

  bool known(int64_t vid) const { return stat_state[vid].state != 0; }

  static std::vector<std::pair<int64_t, int64_t>> layout_runs(const at::Tensor& t) {
    std::vector<std::pair<int64_t, int64_t>> dims, runs;
    for (int64_t d = 0; d < t.dim(); ++d)
      if (t.size(d) != 1) dims.emplace_back(t.stride(d), t.size(d));
    std::sort(dims.begin(), dims.end());
    for (auto& p : dims) {
      if (!runs.empty() && runs.back().first * runs.back().second == p.first) runs.back().second *= p.second;
      else runs.push_back(p);
    }
    return runs;
  }

  bool same_elements(int64_t vid, const at::Tensor& t, int64_t src_vid, const at::Tensor& src) {
    if (src_vid < 0 || owns_storage[vid] || value_storage[vid] != value_storage[src_vid]) return false;
    if (t.scalar_type() != src.scalar_type() || !known(src_vid)) return false;
    if (t.numel() != src.numel() || t.storage_offset() != src.storage_offset()) return false;
    if (t.is_contiguous() && src.is_contiguous()) return true;
    return layout_runs(t) == layout_runs(src);
  }

  void share(int64_t vid, int64_t src) {
    auto& ss = stat_state[src];
    if (ss.state == 1) {
      stat_state[vid] = StatState{3, src};
    } else if (ss.state == 3) {
      stat_state[vid] = StatState{3, ss.ref};
    } else {
      stat_state[vid].state = 2;
      py_shares.emplace_back(vid, src);
    }
  }

  // ------------------------------------------------------------ ops in, ops out

  int64_t produced(const at::Tensor& t, int64_t nid, const at::Tensor* src = nullptr, int64_t src_vid = -1) {
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    auto it = live.find(impl);
    bool inplace = it != live.end() && !it->second.ref.expired();
    int64_t vid;
    if (inplace) {
      vid = new_value(t, nid, {{kVersionOf, it->second.vid}}, kNone);
      if (vid < 0) return -1;
      storage_writer[value_storage[vid]] = nid;
    } else {
      vid = new_value(t, nid, {}, kNone);
      if (vid < 0) return -1;
    }
    if (stats_on && floating(t)) {
      if (!inplace && src && src_vid >= 0 && same_elements(vid, t, src_vid, *src)) share(vid, src_vid);
      else measure(vid, t);
    }
    return vid;
  }

  bool written_through(const at::Tensor& t, int64_t nid) {
    if (!t.has_storage()) return false;
    auto it = storages.find(t.storage().unsafeGetStorageImpl());
    if (it == storages.end()) return false;
    storage_writer[it->second.sid] = nid;
    for (auto& ref : it->second.refs) {
      auto strong = ref.lock();
      if (!strong) continue;
      auto e = live.find(strong.get());
      if (e != live.end() && !e->second.ref.expired()) e->second.version = -1;
    }
    return true;
  }

  void before_write(const at::Tensor& t) {
    if (!stats_on || !t.has_storage()) return;
    auto it = storages.find(t.storage().unsafeGetStorageImpl());
    if (it == storages.end()) return;
    int64_t sid = it->second.sid;
    auto w = later_waiting.find(sid);
    if (w != later_waiting.end()) {
      for (auto& p : w->second) {
        // not yet handed to Python: measured now, here
        for (auto& l : later_new)
          if (std::get<0>(l) == p.first) std::get<0>(l) = -1;
        stat_state[p.first].state = 0;
        measure(p.first, p.second);
      }
      later_waiting.erase(w);
    }
    if (later_handed.count(sid)) {
      later_handed.erase(sid);
      PyGILState_STATE g = PyGILState_Ensure();
      try {
        before_write_cb(sid);
      } catch (py::error_already_set& e) {
        error = e.what();
      }
      PyGILState_Release(g);
    }
  }

  // ------------------------------------------------------------ frames

  int8_t kind_of(PyObject* code) {
    auto it = code_kind.find(code);
    if (it != code_kind.end()) return it->second;
    // NativeRecording._code_kind: (path, library, positions) or None
    py::object got = code_kind_cb(py::reinterpret_borrow<py::object>(code));
    int8_t k = 0;
    PyObject* path = nullptr;
    PyObject* positions = nullptr;
    if (!got.is_none()) {
      py::tuple tup = got.cast<py::tuple>();
      k = tup[1].cast<bool>() ? 2 : 1;
      path = tup[0].ptr();
      positions = tup[2].ptr();
      if (!PyList_CheckExact(positions)) throw std::invalid_argument("code_kind: positions must be a list");
      Py_INCREF(path);
      Py_INCREF(positions);
    }
    Py_INCREF(code);
    code_kind.emplace(code, k);
    code_path.emplace(code, path);
    code_positions.emplace(code, positions);
    return k;
  }

  int64_t intern(PyFrameObject* f, PyObject* code, bool library) {
    int lasti = PyFrame_GetLasti(f);
    uint64_t key = (reinterpret_cast<uint64_t>(code) << 16) ^ static_cast<uint64_t>(lasti) ^
                   (static_cast<uint64_t>(library) << 63);
    auto it = addr_frame.find(key);
    if (it != addr_frame.end()) return it->second;
    int64_t got = new_frame(code, f, lasti, code_path[code], library);
    addr_frame.emplace(key, got);
    return got;
  }

  // TraceFrames._intern_frame, here: the line and column of the instruction at byte offset
  // lasti (its entry of the code's co_positions list, which Python keeps per code object),
  // else the frame's line number, else the code's first line; the Frame made and interned
  // as GraphBuilder.frame interns it (the same key, in the same table).
  int64_t new_frame(PyObject* code, PyFrameObject* f, int lasti, PyObject* path, bool library) {
    PyObject* positions = code_positions[code];
    long line = 0, column = 0;
    if (positions && lasti >= 0 && lasti / 2 < PyList_GET_SIZE(positions)) {
      PyObject* at = PyList_GET_ITEM(positions, lasti / 2);  // (line, end_line, column, end_column)
      if (PyTuple_Check(at) && PyTuple_GET_SIZE(at) == 4) {
        PyObject* l = PyTuple_GET_ITEM(at, 0);
        PyObject* c = PyTuple_GET_ITEM(at, 2);
        if (PyLong_Check(l)) line = PyLong_AsLong(l);
        if (PyLong_Check(c)) column = PyLong_AsLong(c);
      }
    }
    if (line == 0) line = PyFrame_GetLineNumber(f);  // `pline or lineno`
    if (line == 0) line = reinterpret_cast<PyCodeObject*>(code)->co_firstlineno;
    py::object qualname = py::reinterpret_steal<py::object>(PyObject_GetAttrString(code, "co_qualname"));
    if (!qualname) throw py::error_already_set();
    py::object ln = py::reinterpret_steal<py::object>(PyLong_FromLong(line));
    py::object col = py::reinterpret_steal<py::object>(PyLong_FromLong(column));
    PyObject* lib = library ? Py_True : Py_False;
    py::object key = py::reinterpret_steal<py::object>(PyTuple_Pack(5, path, ln.ptr(), col.ptr(), qualname.ptr(), lib));
    if (!key) throw py::error_already_set();
    PyObject* known = PyDict_GetItemWithError(frame_ids.ptr(), key.ptr());  // borrowed
    if (known) return PyLong_AsLongLong(known);
    if (PyErr_Occurred()) throw py::error_already_set();
    PyObject* args[5] = {path, ln.ptr(), col.ptr(), qualname.ptr(), lib};
    py::object frame = py::reinterpret_steal<py::object>(frame_cls.make(args, 5));
    Py_ssize_t fid = PyList_GET_SIZE(frame_list.ptr());
    py::object id = py::reinterpret_steal<py::object>(PyLong_FromSsize_t(fid));
    if (PyDict_SetItem(frame_ids.ptr(), key.ptr(), id.ptr()) < 0 || PyList_Append(frame_list.ptr(), frame.ptr()) < 0)
      throw py::error_already_set();
    return fid;
  }

  // TraceFrames.frame_of from the innermost Python frame (GIL held).
  int64_t frame_of(PyFrameObject* f0) {
    int64_t lib_fid = -1;
    bool have_lib = false;
    PyFrameObject* f = f0;
    Py_XINCREF(f);
    int64_t result = -1;
    while (f) {
      if (f == top.stop) {
        if (have_lib && (top.stop_fid < 0 || top.stop_lib)) result = lib_fid;
        else result = top.stop_fid;
        Py_DECREF(f);
        return result;
      }
      PyCodeObject* code = PyFrame_GetCode(f);
      PyObject* c = reinterpret_cast<PyObject*>(code);
      int8_t k = kind_of(c);
      if (k == 1) {
        result = intern(f, c, false);
        Py_DECREF(code);
        Py_DECREF(f);
        return result;
      }
      if (reinterpret_cast<PyObject*>(f) == outer) {
        Py_DECREF(code);
        Py_DECREF(f);
        return have_lib ? lib_fid : -1;
      }
      if (k == 2 && !have_lib) {
        lib_fid = intern(f, c, true);
        have_lib = true;
      }
      Py_DECREF(code);
      PyFrameObject* b = PyFrame_GetBack(f);
      Py_DECREF(f);
      f = b;
    }
    return have_lib ? lib_fid : -1;
  }

  int64_t current_frame() {
    if (top_frame != -2) return top_frame;
    PyGILState_STATE g = PyGILState_Ensure();
    try {
      top_frame = frame_of(PyEval_GetFrame());
    } catch (py::error_already_set& e) {
      error = e.what();
      top_frame = -1;
    }
    PyGILState_Release(g);
    return top_frame;
  }

  // ------------------------------------------------------------ module hooks
  //
  // TorchTrace._pre_hook and _post_hook (with the guard around them and
  // NativeRecording.top after them) for a native recording: the same groups, names,
  // attributes, frames and stack entries, made here rather than by three Python frames
  // and a context manager per hook call (~10 us of Python per module call). What is
  // rare stays in Python: a module class seen the first time (its template), the groups
  // limit, a result that is not one tensor, a sync with more than rows to hand over.
  struct Hooks {
    py::object paths, calls, class_attrs, stack, groups, values, frames;  // the trace's own
    py::object class_template_cb, limit_cb, sync_cb, tree_cb;
    py::object tensor_type, module_kind, outputs_key, value_key, bytes_key, bytes_key_result, path_key, call_key,
        frame_key, attrs_name, measured_name, library_name;
    Maker group_cls;
    int64_t max_groups = 0;
  } hooks;
  std::vector<int8_t> frame_library;  // per frame id: -1 not read yet, else Frame.library

  // Module calls made here rather than by Module._call_impl (module_call_fast): torch's
  // own _call_impl, the global hook dicts (of which exactly the recorder's two must be
  // registered) and the attribute names read per call.
  struct ModuleCalls {
    py::object call_impl, fwd, fwd_pre, bwd, bwd_pre;
    py::object forward_name, own_hooks[4];
  } mc;

  bool library_frame(int64_t fid) {
    if (fid < 0) return false;
    if (static_cast<size_t>(fid) >= frame_library.size()) frame_library.resize(fid + 1, -1);
    int8_t& known = frame_library[fid];
    if (known < 0) {
      PyObject* f = PyList_GetItem(hooks.frames.ptr(), fid);  // borrowed
      if (!f) throw py::error_already_set();
      PyObject* lib = PyObject_GetAttr(f, hooks.library_name.ptr());
      if (!lib) throw py::error_already_set();
      int truth = PyObject_IsTrue(lib);
      Py_DECREF(lib);
      if (truth < 0) throw py::error_already_set();
      known = static_cast<int8_t>(truth);
    }
    return known == 1;
  }

  // NativeRecording.top: the innermost open group and module call, from the trace's stack.
  void top_from_stack() {
    PyObject* stack = hooks.stack.ptr();
    Py_ssize_t n = PyList_GET_SIZE(stack);
    if (n == 0) {
      group = -1;
      top = Frame{};
      return;
    }
    PyObject* e = PyList_GET_ITEM(stack, n - 1);
    group = PyLong_AsLongLong(PyTuple_GET_ITEM(e, 0));
    PyObject* fr = PyTuple_GET_ITEM(e, 3);
    top.stop = fr == Py_None ? nullptr : reinterpret_cast<PyFrameObject*>(fr);
    PyObject* fid = PyTuple_GET_ITEM(e, 4);
    top.stop_fid = fid == Py_None ? -1 : PyLong_AsLongLong(fid);
    top.stop_lib = library_frame(top.stop_fid);
  }

  static bool truthy_str(PyObject* o) { return o != Py_None && PyUnicode_Check(o) && PyUnicode_GET_LENGTH(o) > 0; }

  void pre_hook(PyObject* module) {
    try {
      open_module(module);
    } catch (...) {
      top_from_stack();
      throw;
    }
    top_from_stack();
  }

  void open_module(PyObject* module) {
    py::object key = py::reinterpret_steal<py::object>(PyLong_FromVoidPtr(module));  // id(module)
    PyObject* path = PyDict_GetItemWithError(hooks.paths.ptr(), key.ptr());
    if (!path) {
      if (PyErr_Occurred()) throw py::error_already_set();
      path = Py_None;
    }
    PyObject* seen = PyDict_GetItemWithError(hooks.calls.ptr(), key.ptr());
    if (!seen && PyErr_Occurred()) throw py::error_already_set();
    py::object call = py::int_(seen ? PyLong_AsLongLong(seen) + 1 : 0);
    if (PyDict_SetItem(hooks.calls.ptr(), key.ptr(), call.ptr()) < 0) throw py::error_already_set();
    PyObject* stack = hooks.stack.ptr();
    Py_ssize_t depth = PyList_GET_SIZE(stack);
    PyObject* parent = Py_None;
    PyObject* parent_path = Py_None;
    if (depth) {
      PyObject* e = PyList_GET_ITEM(stack, depth - 1);
      parent = PyTuple_GET_ITEM(e, 0);
      parent_path = PyTuple_GET_ITEM(e, 1);
    }
    PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(module));
    py::object tmpl = py::reinterpret_borrow<py::object>(PyDict_GetItemWithError(hooks.class_attrs.ptr(), cls));
    if (!tmpl) {
      if (PyErr_Occurred()) throw py::error_already_set();
      tmpl = hooks.class_template_cb(py::handle(cls));  // made and kept by the trace
    }
    PyObject* tmpl_attrs = PyTuple_GetItem(tmpl.ptr(), 0);
    if (!tmpl_attrs) throw py::error_already_set();
    py::object name;
    if (!truthy_str(path)) {
      name = py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(tmpl.ptr(), 1));
    } else {
      Py_ssize_t plen = truthy_str(parent_path) ? PyUnicode_GET_LENGTH(parent_path) : -1;
      if (plen > 0 && PyUnicode_GET_LENGTH(path) > plen && PyUnicode_READ_CHAR(path, plen) == '.' &&
          PyUnicode_Tailmatch(path, parent_path, 0, plen, -1) == 1) {
        name = py::reinterpret_steal<py::object>(PyUnicode_Substring(path, plen + 1, PyUnicode_GET_LENGTH(path)));
        if (!name) throw py::error_already_set();
      } else {
        name = py::reinterpret_borrow<py::object>(path);
      }
    }
    py::object attrs = py::reinterpret_steal<py::object>(PyDict_Copy(tmpl_attrs));
    if (!attrs) throw py::error_already_set();
    if (PyDict_SetItem(attrs.ptr(), hooks.path_key.ptr(), path) < 0 ||
        PyDict_SetItem(attrs.ptr(), hooks.call_key.ptr(), call.ptr()) < 0)
      throw py::error_already_set();
    // The module-call frame the hook is called from (what sys._getframe(2) is to the
    // Python hook): the ops of this call run below it.
    PyFrameObject* entry = PyEval_GetFrame();
    int64_t fid = frame_of(entry);
    py::object fid_obj = fid >= 0 ? py::object(py::int_(fid)) : py::none();
    if (fid >= 0 && PyDict_SetItem(attrs.ptr(), hooks.frame_key.ptr(), fid_obj.ptr()) < 0)
      throw py::error_already_set();
    PyObject* groups = hooks.groups.ptr();
    Py_ssize_t gid = PyList_GET_SIZE(groups);
    if (gid >= hooks.max_groups) hooks.limit_cb(gid);  // raises LimitExceeded
    py::object gid_obj = py::int_(gid);
    untracked(attrs.ptr());
    PyObject* fields[5] = {gid_obj.ptr(), hooks.module_kind.ptr(), name.ptr(), parent, attrs.ptr()};
    py::object g = py::reinterpret_steal<py::object>(hooks.group_cls.make(fields, 5));
    if (PyList_Append(groups, g.ptr()) < 0) throw py::error_already_set();
    py::object entry_obj = entry ? py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(entry)) : py::none();
    py::tuple item = py::make_tuple(gid_obj, py::reinterpret_borrow<py::object>(path == Py_None ? parent_path : path),
                                    key, entry_obj, fid_obj);
    if (PyList_Append(stack, item.ptr()) < 0) throw py::error_already_set();
  }

  void post_hook(PyObject* module, PyObject* output) {
    try {
      close_module(module, output);
    } catch (...) {
      top_from_stack();
      throw;
    }
    top_from_stack();
  }

  int64_t value_bytes(int64_t vid) {
    if (vid >= values_base) return values[vid - values_base].bytes;
    PyObject* v = PyList_GetItem(hooks.values.ptr(), vid);
    if (!v) throw py::error_already_set();
    py::object measured = py::reinterpret_steal<py::object>(PyObject_GetAttr(v, hooks.measured_name.ptr()));
    if (!measured) throw py::error_already_set();
    return measured[hooks.bytes_key].cast<int64_t>();
  }

  void close_module(PyObject* module, PyObject* output) {
    py::object key = py::reinterpret_steal<py::object>(PyLong_FromVoidPtr(module));
    PyObject* stack = hooks.stack.ptr();
    Py_ssize_t n = PyList_GET_SIZE(stack);
    auto owner_is_key = [&](Py_ssize_t i) {
      int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(PyList_GET_ITEM(stack, i), 2), key.ptr(), Py_EQ);
      if (eq < 0) throw py::error_already_set();
      return eq == 1;
    };
    int64_t gid;
    if (n && owner_is_key(n - 1)) {
      gid = PyLong_AsLongLong(PyTuple_GET_ITEM(PyList_GET_ITEM(stack, n - 1), 0));
      if (PyList_SetSlice(stack, n - 1, n, nullptr) < 0) throw py::error_already_set();
    } else {
      Py_ssize_t at = -1;
      for (Py_ssize_t i = 0; i < n; ++i)
        if (owner_is_key(i)) at = i;
      if (at < 0) return;
      // the innermost open call of this module, and every group left open inside it
      gid = PyLong_AsLongLong(PyTuple_GET_ITEM(PyList_GET_ITEM(stack, at), 0));
      if (PyList_SetSlice(stack, at, n, nullptr) < 0) throw py::error_already_set();
    }
    if (output == Py_None) return;
    if (reinterpret_cast<PyObject*>(Py_TYPE(output)) != hooks.tensor_type.ptr()) {
      hooks.tree_cb(gid, py::handle(output));  // a tuple, a dict, a model output...
      return;
    }
    int64_t vid;
    {
      OwnCalls own;  // an op here (none is expected) is the recorder's own
      vid = value_of(THPVariable_Unpack(output));
    }
    note();
    if (state != nullptr && state[1]) hooks.sync_cb();  // a limit raises there, as in a sync
    if (vid < 0) return;
    PyObject* g = PyList_GetItem(hooks.groups.ptr(), gid);
    if (!g) throw py::error_already_set();
    py::object attrs = py::reinterpret_steal<py::object>(PyObject_GetAttr(g, hooks.attrs_name.ptr()));
    if (!attrs) throw py::error_already_set();
    py::dict outputs;
    outputs[hooks.value_key] = py::int_(vid);
    if (PyDict_SetItem(attrs.ptr(), hooks.outputs_key.ptr(), outputs.ptr()) < 0) throw py::error_already_set();
    py::object nbytes = py::int_(value_bytes(vid));
    if (PyDict_SetItem(attrs.ptr(), hooks.bytes_key_result.ptr(), nbytes.ptr()) < 0) throw py::error_already_set();
    untracked(attrs.ptr());  // the outputs dict made it tracked again
  }

  // ------------------------------------------------------------ the function mode
  //
  // The function mode (capture.torch.functions.FunctionCalls) for a native recording: its
  // __torch_function__ is this recorder's torch_function, so a torch call costs no Python
  // frame. It reads the node count before and after the call (the rows are not turned
  // into nodes); a call that ran one kernel in the group it started in is queued for
  // NativeRecording._name_functions; a call that ran two or more gets its function group
  // here while its kernels are still rows, else (a sync ran inside it) syncs and calls
  // FunctionCalls._ran with the caller's frame.
  struct Functions {
    py::object names;             // func -> (qualified, short) or None, shared with Python
    py::object public_name_cb;    // capture.torch.functions.public_name
    py::object ran_cb;            // FunctionCalls._ran, through a weak reference
    py::object calls;             // NativeRecording.functions
    py::object data_name;         // "torch.Tensor.data"
    py::object function_kind = py::str("function"), function_key = py::str("function");  // capture.torch.functions
    bool on = false;
  } fm;

  // TorchTrace.current_group, -1 for None
  int64_t stack_group() {
    PyObject* stack = hooks.stack.ptr();
    Py_ssize_t n = PyList_GET_SIZE(stack);
    if (n == 0) return -1;
    return PyLong_AsLongLong(PyTuple_GET_ITEM(PyList_GET_ITEM(stack, n - 1), 0));
  }

  py::object function_names(PyObject* func) {
    PyObject* dict = fm.names.ptr();
    PyObject* got = PyDict_GetItemWithError(dict, func);  // borrowed
    if (got) return py::reinterpret_borrow<py::object>(got);
    bool hashable = true;
    if (PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
      PyErr_Clear();  // an unhashable callable: named every call
      hashable = false;
    }
    py::object names = fm.public_name_cb(py::handle(func));
    if (hashable && PyDict_SetItem(dict, func, names.ptr()) < 0) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
      PyErr_Clear();
    }
    return names;
  }

  py::object torch_function(PyObject* func, PyObject* args, PyObject* kwargs) {
    if (!fm.on) throw std::runtime_error("the native recorder's function mode was called outside its recording");
    py::object arg_tuple = py::reinterpret_borrow<py::object>(args);
    if (!PyTuple_Check(args)) {
      arg_tuple = py::reinterpret_steal<py::object>(PySequence_Tuple(args));
      if (!arg_tuple) throw py::error_already_set();
    }
    PyObject* kw = kwargs == Py_None ? nullptr : kwargs;
    auto call = [&]() {
      py::object out = py::reinterpret_steal<py::object>(PyObject_Call(func, arg_tuple.ptr(), kw));
      if (!out) throw py::error_already_set();
      return out;
    };
    py::object names = function_names(func);
    if (names.is_none()) return call();
    int64_t start = state[0];
    PyObject* groups = hooks.groups.ptr();
    Py_ssize_t groups_before = PyList_GET_SIZE(groups);
    int64_t parent = stack_group();
    py::object out = call();
    PyObject* qualified = PyTuple_GET_ITEM(names.ptr(), 0);
    if (PyTuple_GET_SIZE(arg_tuple.ptr()) > 0 && PyUnicode_Compare(qualified, fm.data_name.ptr()) == 0) {
      PyObject* src = PyTuple_GET_ITEM(arg_tuple.ptr(), 0);
      if (THPVariable_Check(src) && THPVariable_Check(out.ptr())) {  // x.data: NativeRecording.data_of
        OwnCalls own;
        data_of(THPVariable_Unpack(src), THPVariable_Unpack(out.ptr()));
        note();
      }
    }
    int64_t end = state[0];
    if (state[1] || end >= state[2]) hooks.sync_cb();  // a limit, statistics, progress
    if (end == start) return out;
    if (end == start + 1 && PyList_GET_SIZE(groups) == groups_before && stack_group() == parent) {
      py::object item = py::make_tuple(start, py::reinterpret_borrow<py::object>(qualified),
                                       parent < 0 ? py::none() : py::object(py::int_(parent)));
      if (PyList_Append(fm.calls.ptr(), item.ptr()) < 0) throw py::error_already_set();
      return out;
    }
    PyFrameObject* caller = PyEval_GetFrame();  // borrowed: the code that called func
    if (start >= nodes_base) {
      // Every kernel of the call is still a row (no sync since it started): its function
      // group is made here, as FunctionCalls._group makes it.
      if (PyList_GET_SIZE(groups) != groups_before || stack_group() != parent) return out;
      for (int64_t nid = start; nid < end; ++nid)
        if (nodes[static_cast<size_t>(nid - nodes_base)].group != parent) return out;  // autograd's, say
      function_group(names, parent, caller, start, end);
      return out;
    }
    hooks.sync_cb();
    fm.ran_cb(names, start, groups_before, parent < 0 ? py::none() : py::object(py::int_(parent)),
              caller ? py::handle(reinterpret_cast<PyObject*>(caller)) : py::handle(Py_None));
    return out;
  }

  // The function group of a call whose kernels are rows start..end, all in `parent`
  // (FunctionCalls._group; a native recording has no DTensor boundary nodes among them).
  void function_group(const py::object& names, int64_t parent, PyFrameObject* caller, int64_t start, int64_t end) {
    PyObject* groups = hooks.groups.ptr();
    Py_ssize_t gid = PyList_GET_SIZE(groups);
    if (gid >= hooks.max_groups) hooks.limit_cb(gid);  // raises LimitExceeded
    py::dict attrs;
    attrs[fm.function_key] = py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(names.ptr(), 0));
    int64_t fid = caller ? frame_of(caller) : -1;
    if (fid >= 0) attrs[hooks.frame_key] = py::int_(fid);
    py::object gid_obj = py::int_(gid);
    py::object parent_obj = parent < 0 ? py::none() : py::object(py::int_(parent));
    untracked(attrs.ptr());
    PyObject* fields[5] = {gid_obj.ptr(), fm.function_kind.ptr(), PyTuple_GET_ITEM(names.ptr(), 1), parent_obj.ptr(),
                           attrs.ptr()};
    py::object g = py::reinterpret_steal<py::object>(hooks.group_cls.make(fields, 5));
    if (PyList_Append(groups, g.ptr()) < 0) throw py::error_already_set();
    for (int64_t nid = start; nid < end; ++nid) nodes[static_cast<size_t>(nid - nodes_base)].group = gid;
  }

  // ------------------------------------------------------------ the callback

  void start_event(const at::RecordFunction& fn) {
    bool top_level = open.empty();
    if (top_level) top_frame = -2;
    if (paused || failed) {
      open.push_back(Open{-1, false, true});
      return;
    }
    // What runs with the Python key excluded (a tensor made from data by torch.tensor) never
    // reaches a dispatch mode: not a graph op, nor anything it calls.
    bool above = (top_level || open.back().children_visible) &&
                 !c10::impl::tls_local_dispatch_key_set().excluded_.has(c10::DispatchKey::Python);
    int32_t op = above ? op_of(fn) : -1;
    if (above && op >= 0 && ops[op].invisible) above = false;
    if (!above || op < 0 || ops[op].composite) {
      open.push_back(Open{-1, above && op >= 0 && ops[op].composite, false});
      return;
    }
    const OpInfo& info = ops[op];
    NodeRow row;
    row.op = op;
    row.group = group;
    row.frame = -1;
    auto inputs = fn.inputs();
    const auto& args = info.schema->arguments();
    size_t n = std::min(inputs.size(), args.size());
    if (info.keep_args >= 0) n = std::min(n, static_cast<size_t>(info.keep_args));
    // what a dispatch mode's args/kwargs hold: trailing positional defaults and kwarg-only
    // defaults left out
    size_t kw_start = n;
    while (kw_start > 0 && args[kw_start - 1].kwarg_only()) --kw_start;
    auto is_default = [&](size_t i) {
      const auto& d = args[i].default_value();
      return d.has_value() && !(*d != inputs[i]);
    };
    size_t pos_end = kw_start;
    while (pos_end > 0 && is_default(pos_end - 1)) --pos_end;
    for (size_t i = 0; i < n; ++i) {
      if (i >= pos_end && i < kw_start) continue;
      if (i >= kw_start && is_default(i)) continue;
      add_operand(row, static_cast<int32_t>(i), inputs[i], info.kinds[i]);
      if (failed) break;
      if (i == 0 && inputs[0].isTensor() && is_value(inputs[0].toTensor())) {
        row.first = inputs[0].toTensor();
        row.first_vid = row.inputs[0].value;
      }
    }
    if (failed) {
      open.push_back(Open{-1, false, true});
      return;
    }
    // written arguments: values waiting for statistics on their storages measured first
    for (int i : info.written)
      if (static_cast<size_t>(i) < inputs.size())
        each_tensor(inputs[i], [&](const at::Tensor& t) { row.written.push_back(t); });
    if (stats_on)
      for (const at::Tensor& t : row.written) before_write(t);
    pending.push_back(std::move(row));
    open.push_back(Open{static_cast<int32_t>(pending.size() - 1), false, false});
  }

  template <typename F>
  void each_tensor(const c10::IValue& v, F&& f) {
    if (v.isTensor()) {
      if (is_value(v.toTensor())) f(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec())
        if (is_value(t)) f(t);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor() && is_value(e.toTensor())) f(e.toTensor());
    } else if (v.isTuple()) {
      for (const c10::IValue& e : v.toTupleRef().elements())
        if (e.isTensor() && is_value(e.toTensor())) f(e.toTensor());
    }
  }

  // A literal is kept until its rows are flushed. What boxing allocated for it (an int
  // list's c10::List, a wrapped number's 0-dim tensor) is not: kept, those small blocks
  // would sit among the forward's freed activations until the flush, so that the next
  // activation could not reuse that memory and the heap grew, each page of it faulted
  // in again by the next capture. Int lists are copied into literal_ints, wrapped
  // numbers read into a scalar.
  int32_t add_literal(const c10::IValue& v, int8_t kind) {
    if (v.isIntList()) {
      Literal l{c10::IValue(), kind, static_cast<int32_t>(literal_ints.size()), 0};
      for (int64_t i : v.toIntList()) literal_ints.push_back(i);
      l.n_ints = static_cast<int32_t>(literal_ints.size()) - l.ints;
      literals.push_back(std::move(l));
    } else if (v.isTensor() && v.toTensor().defined() && v.toTensor().unsafeGetTensorImpl()->is_wrapped_number() &&
               v.toTensor().is_cpu()) {
      const at::Tensor& t = v.toTensor();
      switch (t.scalar_type()) {
        case at::kBool: literals.push_back(Literal{c10::IValue(*t.const_data_ptr<bool>()), kind}); break;
        case at::kLong: literals.push_back(Literal{c10::IValue(*t.const_data_ptr<int64_t>()), kind}); break;
        case at::kDouble: literals.push_back(Literal{c10::IValue(*t.const_data_ptr<double>()), kind}); break;
        default: literals.push_back(Literal{v, kind});  // a complex number: literal() reads it
      }
    } else {
      literals.push_back(Literal{v, kind});
    }
    return static_cast<int32_t>(literals.size() - 1);
  }

  py::object literal(const Literal& l) {
    if (l.ints < 0) return literal(l.v, l.kind);
    py::list out(l.n_ints);
    for (int32_t k = 0; k < l.n_ints; ++k) {
      int64_t i = literal_ints[static_cast<size_t>(l.ints + k)];
      py::object item = l.kind == kDtype ? py::reinterpret_borrow<py::object>(dtype_py(static_cast<int8_t>(i)))
                                         : py::object(py::int_(i));
      PyList_SET_ITEM(out.ptr(), k, item.release().ptr());
    }
    return out;
  }

  void add_operand(NodeRow& row, int32_t pos, const c10::IValue& v, int8_t kind) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (is_value(t)) {
        int64_t vid = value_of(t);
        row.inputs.push_back(OperandRow{pos, vid, -1});
      } else {
        row.inputs.push_back(OperandRow{pos, -1, add_literal(v, kind)});
      }
      return;
    }
    if (v.isTensorList() || v.isList() || v.isTuple()) {
      std::vector<c10::IValue> items;
      if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorList().vec()) items.emplace_back(t);
      } else if (v.isList()) {
        for (const c10::IValue& e : v.toListRef()) items.push_back(e);
      } else {
        for (const c10::IValue& e : v.toTupleRef().elements()) items.push_back(e);
      }
      bool has_tensor = false;
      for (auto& e : items)
        if (e.isTensor() && is_value(e.toTensor())) has_tensor = true;
      if (has_tensor) {
        for (auto& e : items) {
          if (e.isTensor() && is_value(e.toTensor())) row.inputs.push_back(OperandRow{pos, value_of(e.toTensor()), -1});
          else row.inputs.push_back(OperandRow{pos, -1, add_literal(e, kind)});
        }
        return;
      }
    }
    row.inputs.push_back(OperandRow{pos, -1, add_literal(v, kind)});
  }

  void end_event(const at::RecordFunction& fn) {
    if (open.empty()) return;
    Open o = open.back();
    open.pop_back();
    if (o.node < 0 || o.paused) return;
    NodeRow row = std::move(pending[o.node]);
    pending.pop_back();
    // The kernel raised (this runs as the exception unwinds): a dispatch mode records no
    // node for an op that did not return.
    if (failed || std::uncaught_exceptions() > 0) return;
    int64_t nid = n_nodes;
    if (nid >= max_ops) {
      fail("max_ops", max_ops, nid + 1, "operations");
      return;
    }
    const OpInfo& info = ops[row.op];
    row.frame = current_frame();
    const auto& outputs = fn.outputs();
    const at::Tensor* first = row.first.defined() ? &row.first : nullptr;
    int64_t first_vid = row.first_vid;
    c10::SmallVector<const c10::TensorImpl*, 4> returned;
    auto produce = [&](const at::Tensor& t, bool single) {
      int64_t vid = single ? produced(t, nid, first, first_vid) : produced(t, nid);
      if (vid >= 0) row.outputs.push_back(vid);
      returned.push_back(t.unsafeGetTensorImpl());
    };
    auto flat = [&](const c10::IValue& v) {
      if (v.isTensor()) {
        if (is_value(v.toTensor())) produce(v.toTensor(), false);
        else if (v.toTensor().defined()) returned.push_back(v.toTensor().unsafeGetTensorImpl());
      } else if (v.isTensorList() || v.isList() || v.isTuple()) {
        each_tensor(v, [&](const at::Tensor& t) { produce(t, false); });
      }
    };
    if (outputs.size() == 1) {
      const c10::IValue& out = outputs[0];
      if (out.isTensor()) {
        const at::Tensor& t = out.toTensor();
        if (is_value(t)) produce(t, true);
        else if (t.defined()) row.result = add_literal(out, kGeneric);
      } else if (out.isTensorList() || out.isList() || out.isTuple()) {
        if (out.isTensorList()) {
          for (const at::Tensor& t : out.toTensorList().vec())
            if (is_value(t)) produce(t, false);
        } else {
          const auto& elems = out.isList() ? out.toListRef().vec() : out.toTupleRef().elements().vec();
          for (const c10::IValue& e : elems) flat(e);
        }
      } else if (!out.isNone()) {
        row.result = add_literal(out, kGeneric);
      }
    } else {
      for (const c10::IValue& e : outputs) flat(e);
    }
    for (const at::Tensor& t : row.written) {
      const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
      bool was_returned = false;
      for (auto r : returned) was_returned = was_returned || r == impl;
      if (was_returned) continue;
      if (t.is_view() && written_through(t, nid)) continue;
      int64_t vid = produced(t, nid);
      if (vid >= 0) row.outputs.push_back(vid);
    }
    row.first = at::Tensor();
    row.written.clear();
    if (failed) return;
    nodes.push_back(std::move(row));
    ++n_nodes;
  }

  std::vector<NodeRow> pending;  // open graph ops (their operands recorded, outputs not yet)
  // The lists flush() appends to: the builder's values and nodes, the trace's per-value
  // storage, owns-storage, producer and born lists (set once: they are never replaced).
  std::vector<py::list> targets;

  // ``x.data``: no op runs, but a dispatch mode makes it an aten::detach of x (recorded
  // so, as the Python path records it). Called from the function mode, outside any op.
  void data_of(const at::Tensor& src, const at::Tensor& out) {
    if (paused || failed || !open.empty()) return;
    auto it = op_by_name.find("aten::detach.");
    int32_t op;
    if (it == op_by_name.end()) {
      OpInfo info;
      info.name = "aten::detach";
      op = static_cast<int32_t>(ops.size());
      ops.push_back(std::move(info));
      op_by_name.emplace("aten::detach.", op);
    } else {
      op = it->second;
    }
    NodeRow row;
    row.op = op;
    row.group = group;
    int64_t vin = value_of(src);
    if (vin < 0) return;
    row.inputs.push_back(OperandRow{0, vin, -1});
    int64_t nid = n_nodes;
    if (nid >= max_ops) {
      fail("max_ops", max_ops, nid + 1, "operations");
      return;
    }
    top_frame = -2;
    row.frame = current_frame();
    int64_t vid = produced(out, nid, &src, vin);
    if (vid < 0) return;
    row.outputs.push_back(vid);
    nodes.push_back(std::move(row));
    ++n_nodes;
  }

  // ------------------------------------------------------------ flush into Python

  py::object literal(const c10::IValue& v, int8_t kind) {
    if (v.isNone()) return py::none();
    if (v.isBool()) return py::bool_(v.toBool());
    if (v.isInt()) {
      int64_t i = v.toInt();
      if (kind == kDtype) return py::reinterpret_borrow<py::object>(dtype_py(static_cast<int8_t>(i)));
      if (kind == kLayout) return py::str(layout_name(static_cast<c10::Layout>(i)));
      if (kind == kMemFormat) return py::str(memory_format_name(static_cast<c10::MemoryFormat>(i)));
      return py::int_(i);
    }
    if (v.isDouble()) return py::float_(v.toDouble());
    if (v.isString()) return py::str(v.toStringRef());
    if (v.isComplexDouble()) {
      auto c = v.toComplexDouble();
      py::dict d;
      d["complex"] = py::list(py::make_tuple(c.real(), c.imag()));
      return d;
    }
    if (v.isDevice()) return py::str(v.toDevice().str());
    if (v.isTensor()) {  // a wrapped number: a dispatch mode gets the number
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) return py::none();
      OwnCalls own;
      switch (t.scalar_type()) {
        case at::kBool: return py::bool_(t.item<bool>());
        case at::kLong: return py::int_(t.item<int64_t>());
        case at::kDouble: return py::float_(t.item<double>());
        case at::kComplexDouble: {
          auto c = t.item<c10::complex<double>>();
          py::dict d;
          d["complex"] = py::list(py::make_tuple(c.real(), c.imag()));
          return d;
        }
        default: return py::float_(t.item<double>());
      }
    }
    if (v.isIntList()) {
      py::list out;
      for (int64_t i : v.toIntVector()) {
        if (kind == kDtype) out.append(py::reinterpret_borrow<py::object>(dtype_py(static_cast<int8_t>(i))));
        else out.append(py::int_(i));
      }
      return out;
    }
    if (v.isList()) {
      py::list out;
      for (const c10::IValue& e : v.toListRef()) out.append(literal(e, kind));
      return out;
    }
    if (v.isTuple()) {
      py::list out;
      for (const c10::IValue& e : v.toTupleRef().elements()) out.append(literal(e, kind));
      return out;
    }
    if (v.isSymInt()) return py::int_(v.toSymInt().guard_int(__FILE__, __LINE__));
    if (v.isSymFloat()) return py::float_(v.toSymFloat().guard_float(__FILE__, __LINE__));
    py::dict d;
    std::string tn = v.tagKind();
    if (v.isGenerator()) tn = "Generator";
    else if (v.isStream()) tn = "Stream";
    d["opaque"] = tn;
    return d;
  }

  static const char* layout_name(c10::Layout l) {
    switch (l) {
      case c10::kStrided: return "strided";
      case c10::kSparse: return "sparse_coo";
      case c10::kSparseCsr: return "sparse_csr";
      case c10::kSparseCsc: return "sparse_csc";
      case c10::kSparseBsr: return "sparse_bsr";
      case c10::kSparseBsc: return "sparse_bsc";
      case c10::kMkldnn: return "_mkldnn";
      case c10::kJagged: return "jagged";
      default: return "unknown";
    }
  }

  static const char* memory_format_name(c10::MemoryFormat m) {
    switch (m) {
      case c10::MemoryFormat::Contiguous: return "contiguous_format";
      case c10::MemoryFormat::ChannelsLast: return "channels_last";
      case c10::MemoryFormat::ChannelsLast3d: return "channels_last_3d";
      case c10::MemoryFormat::Preserve: return "preserve_format";
      default: return "unknown";
    }
  }

  PyObject* dtype_py(int8_t st) {
    auto it = dtype_names.find(st);
    if (it != dtype_names.end()) return it->second;
    ensure_dtype(static_cast<at::ScalarType>(st));
    return dtype_names[st];
  }

  PyObject* stats_dict(int64_t row) {
    PyObject* got = stats_py[row];
    if (got) return got;
    const Stats& s = stats[row];
    ensure_keys();
    PyObject* d = PyDict_New();
    if (!d) throw py::error_already_set();
    auto put = [&](PyObject* k, PyObject* v) {  // v: a new reference (None: borrowed, given one)
      if (!v || PyDict_SetItem(d, k, v) < 0) {
        Py_XDECREF(v);
        Py_DECREF(d);
        throw py::error_already_set();
      }
      Py_DECREF(v);
    };
    auto spread = [&]() {
      if (s.masked && s.none) {
        for (PyObject* k : {K.min, K.max, K.mean, K.std}) put(k, Py_NewRef(Py_None));
        return;
      }
      put(K.min, PyFloat_FromDouble(s.mn));
      put(K.max, PyFloat_FromDouble(s.mx));
      put(K.mean, PyFloat_FromDouble(s.mean));
      put(K.std, PyFloat_FromDouble(s.sd));
    };
    if (s.masked) {  // NaN/Inf present: the counts first, as stats.py orders them
      put(K.nan, PyLong_FromLongLong(s.nan));
      put(K.inf, PyLong_FromLongLong(s.inf));
      spread();
    } else {
      spread();
      put(K.nan, PyLong_FromLongLong(0));
      put(K.inf, PyLong_FromLongLong(0));
    }
    stats_py[row] = d;
    return d;
  }

  struct Keys {
    PyObject *device, *strides, *storage_offset, *layout, *bytes, *version_of, *written_by, *changed, *param, *buffer,
        *input, *external, *requires_grad, *storage, *stats, *cpu, *result, *min, *max, *mean, *std, *nan, *inf;
  };
  Keys K{};

  void ensure_keys() {
    if (K.device) return;
    auto in = [](const char* s) { return PyUnicode_InternFromString(s); };
    K = Keys{in("device"), in("strides"), in("storage_offset"), in("layout"), in("bytes"), in("version_of"),
             in("written_by"), in("changed_outside_trace"), in("param"), in("buffer"), in("input"), in("external"),
             in("requires_grad"), in("storage"), in("stats"), in("cpu"), in("result"), in("min"), in("max"),
             in("mean"), in("std"), in("nan"), in("inf")};
  }

  static PyObject* int_list(c10::ArrayRef<int64_t> v) {
    PyObject* l = PyList_New(static_cast<Py_ssize_t>(v.size()));
    for (size_t i = 0; i < v.size(); ++i) PyList_SET_ITEM(l, static_cast<Py_ssize_t>(i), PyLong_FromLongLong(v[i]));
    return untracked(l);
  }

  static void set_new(PyObject* d, PyObject* k, PyObject* v) {
    PyDict_SetItem(d, k, v);
    Py_DECREF(v);
  }

  // The value's measured dict, in the Python path's key order (a new reference).
  PyObject* measured_of(const ValueRow& r, int64_t vid) {
    PyObject* m = PyDict_New();
    if (r.device.empty()) PyDict_SetItem(m, K.device, K.cpu);
    else set_new(m, K.device, PyUnicode_FromString(r.device.c_str()));
    if (r.strided) {
      set_new(m, K.strides, int_list(r.strides));
      if (r.offset != 0) set_new(m, K.storage_offset, PyLong_FromLongLong(r.offset));
    } else {
      set_new(m, K.layout, PyUnicode_FromString(r.layout.c_str()));
    }
    set_new(m, K.bytes, PyLong_FromLongLong(r.bytes));
    for (auto& e : r.extra) {
      switch (e.first) {
        case kVersionOf: set_new(m, K.version_of, PyLong_FromLongLong(e.second)); break;
        case kWrittenBy: set_new(m, K.written_by, PyLong_FromLongLong(e.second)); break;
        case kChangedOutside: PyDict_SetItem(m, K.changed, Py_True); break;
        case kParam: set_new(m, K.param, PyUnicode_FromString(r.label->second.c_str())); break;
        case kBuffer: set_new(m, K.buffer, PyUnicode_FromString(r.label->second.c_str())); break;
        case kInput: set_new(m, K.input, PyUnicode_FromString(r.label->second.c_str())); break;
        case kExternal: PyDict_SetItem(m, K.external, Py_True); break;
        case kRequiresGrad: PyDict_SetItem(m, K.requires_grad, Py_True); break;
        case kOtherLabel: {
          PyObject* k = PyUnicode_FromString(r.label->first.c_str());
          set_new(m, k, PyUnicode_FromString(r.label->second.c_str()));
          Py_DECREF(k);
          break;
        }
      }
    }
    set_new(m, K.storage, PyLong_FromLongLong(r.storage));
    auto& ss = stat_state[vid];
    if (ss.state == 1) PyDict_SetItem(m, K.stats, stats_dict(ss.ref));
    else if (ss.state == 3) PyDict_SetItem(m, K.stats, stats_dict(stat_state[ss.ref].ref));
    return untracked(m);
  }

  static void append_new(PyObject* list, PyObject* item) {
    PyList_Append(list, item);
    Py_DECREF(item);
  }

  static PyObject* call(Maker& cls, PyObject** args, size_t n) { return cls.make(args, n); }

  // Append the rows since the last flush to the builder's lists; the rest for Python.
  py::object flush(py::list py_values, py::list py_nodes, py::list py_vstorage, py::list py_owns, py::list py_producer,
                   py::list py_born) {
    if (values.empty() && nodes.empty() && late_outputs.empty() && py_shares.empty() && later_new.empty() && !failed &&
        error.empty())
      return py::none();
    ensure_keys();
    for (size_t i = 0; i < values.size(); ++i) {
      int64_t vid = values_base + static_cast<int64_t>(i);
      const ValueRow& r = values[i];
      PyObject* args[5] = {PyLong_FromLongLong(vid), int_list(r.shape), dtype_py(r.dtype), measured_of(r, vid), Py_None};
      PyObject* v = call(value_cls, args, 5);
      Py_DECREF(args[0]);
      Py_DECREF(args[1]);
      Py_DECREF(args[3]);
      append_new(py_values.ptr(), v);
    }
    for (int64_t vid = values_base; vid < n_values; ++vid) {
      append_new(py_vstorage.ptr(), PyLong_FromLongLong(value_storage[vid]));
      PyList_Append(py_owns.ptr(), owns_storage[vid] ? Py_True : Py_False);
      append_new(py_producer.ptr(), PyLong_FromLongLong(producer[vid]));
      append_new(py_born.ptr(), PyLong_FromLongLong(born[vid]));
    }
    values.clear();
    values_base = n_values;
    for (size_t i = 0; i < nodes.size(); ++i) {
      NodeRow& r = nodes[i];
      int64_t nid = nodes_base + static_cast<int64_t>(i);
      PyObject* ins = PyList_New(static_cast<Py_ssize_t>(r.inputs.size()));
      for (size_t j = 0; j < r.inputs.size(); ++j) {
        auto& o = r.inputs[j];
        PyObject* pos = PyLong_FromLongLong(o.position);
        PyObject* got;
        if (o.literal >= 0) {
          py::object lit = literal(literals[o.literal]);
          PyObject* args[3] = {pos, Py_None, lit.ptr()};
          got = call(operand_cls, args, 3);
        } else {
          PyObject* val = PyLong_FromLongLong(o.value);
          PyObject* args[3] = {pos, val, Py_None};
          got = call(operand_cls, args, 3);
          Py_DECREF(val);
        }
        Py_DECREF(pos);
        PyList_SET_ITEM(ins, static_cast<Py_ssize_t>(j), got);
      }
      PyObject* outs = int_list(r.outputs);
      PyObject* params = PyDict_New();
      if (r.result >= 0) {
        py::object lit = literal(literals[r.result]);
        PyDict_SetItem(params, K.result, lit.ptr());
      }
      PyObject* g = r.group >= 0 ? PyLong_FromLongLong(r.group) : (Py_INCREF(Py_None), Py_None);
      PyObject* f = r.frame >= 0 ? PyLong_FromLongLong(r.frame) : (Py_INCREF(Py_None), Py_None);
      PyObject* id = PyLong_FromLongLong(nid);
      untracked(ins);
      untracked(params);
      PyObject* args[8] = {id, op_py_name(r.op), ins, outs, params, g, f, Py_False};
      PyObject* node = call(node_cls, args, 8);
      Py_DECREF(id);
      Py_DECREF(ins);
      Py_DECREF(outs);
      Py_DECREF(params);
      Py_DECREF(g);
      Py_DECREF(f);
      append_new(py_nodes.ptr(), node);
    }
    nodes.clear();
    nodes_base = n_nodes;
    // literals of open ops stay (their indices are in pending rows)
    if (pending.empty()) {
      literals.clear();
      literal_ints.clear();
    }
    py::list late;
    for (auto& p : late_outputs) late.append(py::make_tuple(p.first, p.second));
    late_outputs.clear();
    py::list shares;
    for (auto& p : py_shares) shares.append(py::make_tuple(p.first, p.second));
    py_shares.clear();
    py::list later_rows;
    for (auto& l : later_new) {
      int64_t vid = std::get<0>(l);
      if (vid < 0) continue;
      later_rows.append(py::make_tuple(vid, py::reinterpret_steal<py::object>(THPVariable_Wrap(std::get<1>(l))),
                                       std::get<2>(l)));
      later_handed.insert(std::get<2>(l));
    }
    later_new.clear();
    later_waiting.clear();
    py::object err = py::none();
    if (failed) err = py::make_tuple(fail_kind, fail_limit, fail_got, fail_what);
    py::object cb_error = error.empty() ? py::object(py::none()) : py::object(py::str(error));
    note();
    return py::make_tuple(late, shares, later_rows, err, cb_error);
  }
};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (!tl_owner || !active || tl_inside) return nullptr;
  {
    OwnCalls own_work;
    try {
      active->start_event(fn);
    } catch (const std::exception& e) {
      if (active->error.empty()) active->error = e.what();
      active->failed = true;
      active->open.push_back(Recorder::Open{-1, false, true});
    }
    active->note();
  }
  // Nothing this event calls is a graph op (a graph op's kernel, an op no dispatch mode
  // sees): the recorder's callback (thread-local) off until it ends, so its inner ops are
  // neither boxed nor called back (the next end it sees is this event's). Not
  // enableRecordFunction(false): that rebuilt the callbacks of every scope, under the
  // global callbacks' mutex, twice per op; this rebuilds the one scope the callback has.
  if (!active->open.empty() && !active->open.back().children_visible) {
    at::disableCallback(handle);
    active->rf_off = true;
  }
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (!tl_owner || !active || tl_inside) return;
  if (active->rf_off) {
    at::reenableCallback(handle);
    active->rf_off = false;
  }
  OwnCalls own_work;
  try {
    active->end_event(fn);
  } catch (const std::exception& e) {
    if (active->error.empty()) active->error = e.what();
    active->failed = true;
  }
  active->note();
}

// The callbacks' own cost, for benchmarks/bench_torch_capture.py's native floor: the same
// registration as a recording (every top-level op's inputs and outputs boxed), nothing
// recorded, and each op's inner calls not called back (as for a kernel the recorder sees).
at::CallbackHandle probe_handle = 0;
thread_local bool tl_probe_off = false;

std::unique_ptr<at::ObserverContext> probe_start(const at::RecordFunction&) {
  at::disableCallback(probe_handle);
  tl_probe_off = true;
  return nullptr;
}

void probe_end(const at::RecordFunction&, at::ObserverContext*) {
  if (tl_probe_off) {
    at::reenableCallback(probe_handle);
    tl_probe_off = false;
  }
}

// The function mode's handler as a plain CPython function (METH_FASTCALL): pybind11's
// dispatcher would allocate its argument vectors around every torch call, kernel included.
// Its self is a capsule owning a reference to the recorder. Called as
// handler(mode, func, types, args=(), kwargs=None), by position (as PyTorch calls it) or
// with args / kwargs by name.
PyObject* torch_function_fast(PyObject* self, PyObject* const* argv, Py_ssize_t nargs, PyObject* kwnames) {
  auto* holder = static_cast<std::shared_ptr<Recorder>*>(PyCapsule_GetPointer(self, "tensorviz.recorder"));
  if (!holder) return nullptr;
  PyObject* slots[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  if (nargs > 5) {
    PyErr_SetString(PyExc_TypeError, "__torch_function__ takes at most 5 arguments (mode, func, types, args, kwargs)");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) slots[i] = argv[i];
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    const char* name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
    if (!name) return nullptr;
    int at = std::strcmp(name, "args") == 0 ? 3 : std::strcmp(name, "kwargs") == 0 ? 4 : -1;
    if (at < 0 || slots[at]) {
      PyErr_Format(PyExc_TypeError, "__torch_function__ got an unexpected or repeated argument '%s'", name);
      return nullptr;
    }
    slots[at] = argv[nargs + k];
  }
  if (!slots[0] || !slots[1] || !slots[2]) {
    PyErr_SetString(PyExc_TypeError, "__torch_function__ needs mode, func and types");
    return nullptr;
  }
  py::object empty;
  if (!slots[3]) {
    empty = py::reinterpret_steal<py::object>(PyTuple_New(0));
    slots[3] = empty.ptr();
  }
  try {
    return (*holder)->torch_function(slots[1], slots[3], slots[4] ? slots[4] : Py_None).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyMethodDef torch_function_def = {"torch_function", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&torch_function_fast)),
                                  METH_FASTCALL | METH_KEYWORDS,
                                  "The native recorder's __torch_function__ (Recorder::torch_function)."};

// The Python error for the C++ exception being handled (call only inside a catch block).
void set_error_from_cpp() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown error in the native recorder");
  }
}

// Whether Module._call_impl would do nothing for this call but run the recorder's two
// global hooks around forward: no hook of the module's own, no backward hook, and no
// global hook but the recorder's.
bool module_call_plain(Recorder& r, PyObject* module) {
  auto& m = r.mc;
  if (PyDict_GET_SIZE(m.fwd.ptr()) != 1 || PyDict_GET_SIZE(m.fwd_pre.ptr()) != 1 || PyDict_GET_SIZE(m.bwd.ptr()) != 0 ||
      PyDict_GET_SIZE(m.bwd_pre.ptr()) != 0)
    return false;
  for (const py::object& name : m.own_hooks) {
    PyObject* d = PyObject_GetAttr(module, name.ptr());
    if (!d) {
      PyErr_Clear();
      return false;
    }
    Py_ssize_t n = PyDict_Check(d) ? PyDict_GET_SIZE(d) : -1;
    Py_DECREF(d);
    if (n != 0) return false;
  }
  return true;
}

// After the pre-hook or forward raised: what _call_impl does then, the recorder's
// always-called post-hook run with no result (an error it raises becomes a warning), and
// the first error raised again.
PyObject* module_call_failed(Recorder& r, PyObject* module) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (type && PyErr_GivenExceptionMatches(type, PyExc_Exception)) {
    try {
      r.post_hook(module, Py_None);
    } catch (...) {
      set_error_from_cpp();
      PyObject *t2, *v2, *tb2;
      PyErr_Fetch(&t2, &v2, &tb2);
      PyErr_NormalizeException(&t2, &v2, &tb2);
      PyObject* text = v2 ? PyObject_Str(v2) : nullptr;
      if (!text) PyErr_Clear();
      if (PyErr_WarnFormat(PyExc_UserWarning, 1,
                           "global module forward hook with ``always_call=True`` raised an exception that was "
                           "silenced as another error was raised in forward: %S",
                           text ? text : Py_None) < 0)
        PyErr_Clear();
      Py_XDECREF(text);
      Py_XDECREF(t2);
      Py_XDECREF(v2);
      Py_XDECREF(tb2);
    }
  }
  PyErr_Restore(type, value, tb);
  return nullptr;
}

// A module call while the recorder records, bound to each of the model's modules as its
// _compiled_call_impl (NativeRecording.bind_module_calls), which Module._wrapped_call_impl
// calls instead of Module._call_impl: the recorder's pre-hook, forward, its post-hook,
// as _call_impl runs them with the recorder's global hooks registered, without that
// function's ~8 us of Python per call. Anything else _call_impl would do (a hook of the
// module's own, a backward hook, another global hook, another thread, no recording)
// calls _call_impl itself.
PyObject* module_call_fast(PyObject* self, PyObject* const* argv, Py_ssize_t nargsf, PyObject* kwnames) {
  auto* holder = static_cast<std::shared_ptr<Recorder>*>(PyCapsule_GetPointer(self, "tensorviz.recorder"));
  if (!holder) return nullptr;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "a module call needs its module");
    return nullptr;
  }
  Recorder& r = **holder;
  PyObject* module = argv[0];
  if (active != &r || !tl_owner || tl_inside || !module_call_plain(r, module))
    return PyObject_Vectorcall(r.mc.call_impl.ptr(), argv, nargs, kwnames);
  try {
    r.pre_hook(module);
  } catch (...) {
    set_error_from_cpp();
    return module_call_failed(r, module);
  }
  PyObject* forward = PyObject_GetAttr(module, r.mc.forward_name.ptr());
  if (!forward) return module_call_failed(r, module);
  PyObject* out = PyObject_Vectorcall(forward, argv + 1, nargs - 1, kwnames);
  Py_DECREF(forward);
  if (!out) return module_call_failed(r, module);
  try {
    r.post_hook(module, out);
  } catch (...) {
    Py_DECREF(out);
    set_error_from_cpp();
    return nullptr;
  }
  return out;
}

PyMethodDef module_call_def = {"module_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&module_call_fast)),
                               METH_FASTCALL | METH_KEYWORDS,
                               "A module call while the native recorder records (module_call_fast)."};

// A CPython function of ``def`` whose self is a capsule owning a reference to the recorder.
py::object bound_to(PyMethodDef* def, const std::shared_ptr<Recorder>& r) {
  auto* holder = new std::shared_ptr<Recorder>(r);
  PyObject* cap = PyCapsule_New(holder, "tensorviz.recorder", [](PyObject* c) {
    delete static_cast<std::shared_ptr<Recorder>*>(PyCapsule_GetPointer(c, "tensorviz.recorder"));
  });
  if (!cap) {
    delete holder;
    throw py::error_already_set();
  }
  py::object owner = py::reinterpret_steal<py::object>(cap);
  PyObject* fn = PyCFunction_NewEx(def, owner.ptr(), nullptr);
  if (!fn) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(fn);
}

}  // namespace

// ------------------------------------------------------------------ Python API

struct PyRecorder {
  std::shared_ptr<Recorder> r;
};

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<PyRecorder>(m, "Recorder", py::module_local())
      .def(py::init([](py::dict cfg) {
        auto rec = std::make_shared<Recorder>();
        rec->value_cls.init(cfg["value"]);
        rec->node_cls.init(cfg["node"]);
        rec->operand_cls.init(cfg["operand"]);
        rec->code_kind_cb = cfg["code_kind"];
        rec->frame_cls.init(cfg["frame"]);
        rec->frame_ids = cfg["frame_ids"];
        rec->frame_list = cfg["frames"];
        if (!PyDict_CheckExact(rec->frame_ids.ptr()) || !PyList_CheckExact(rec->frame_list.ptr()))
          throw std::invalid_argument("Recorder: frame_ids must be a dict and frames a list");
        rec->before_write_cb = cfg["before_write"];
        rec->max_ops = cfg["max_ops"].cast<int64_t>();
        rec->max_values = cfg["max_values"].cast<int64_t>();
        rec->stats_on = cfg["stats"].cast<bool>();
        rec->params_later = cfg["parameters_later"].cast<bool>();
        return PyRecorder{rec};
      }))
      .def("import_state", [](PyRecorder& self, py::list live, py::list storages, int64_t n_storages,
                              py::list value_storage, py::list owns, py::list producer, py::list born,
                              py::dict writer, py::list known, int64_t n_values, int64_t n_nodes) {
        Recorder& r = *self.r;
        for (auto item : live) {
          py::tuple t = item.cast<py::tuple>();
          at::Tensor x = THPVariable_Unpack(t[0].ptr());
          int64_t version = t[1].is_none() ? kNone : t[1].cast<int64_t>();
          r.live.insert_or_assign(x.unsafeGetTensorImpl(), LiveEntry{TensorWeak(x.getIntrusivePtr()), version, t[2].cast<int64_t>()});
        }
        for (auto item : storages) {
          py::tuple t = item.cast<py::tuple>();
          StorageEntry e{t[1].cast<int64_t>(), {}};
          for (auto x : t[2].cast<py::list>()) e.refs.emplace_back(THPVariable_Unpack(x.ptr()).getIntrusivePtr());
          r.storages[reinterpret_cast<const void*>(t[0].cast<int64_t>())] = std::move(e);
        }
        r.n_storages = n_storages;
        for (auto x : value_storage) r.value_storage.push_back(x.cast<int64_t>());
        for (auto x : owns) r.owns_storage.push_back(x.cast<bool>());
        for (auto x : producer) r.producer.push_back(x.cast<int64_t>());
        for (auto x : born) r.born.push_back(x.cast<int64_t>());
        for (auto kv : writer) r.storage_writer[kv.first.cast<int64_t>()] = kv.second.cast<int64_t>();
        r.stat_state.resize(n_values);
        for (auto x : known) r.stat_state[x.cast<int64_t>()].state = 2;
        r.n_values = r.values_base = n_values;
        r.n_nodes = r.nodes_base = n_nodes;
        r.note();
      })
      .def("label", [](PyRecorder& self, py::object t, std::string kind, std::string name) {
        at::Tensor x = THPVariable_Unpack(t.ptr());
        auto& labels = self.r->labels;
        if (labels.find(x.unsafeGetTensorImpl()) == labels.end()) {
          labels.emplace(x.unsafeGetTensorImpl(), std::make_pair(kind, name));
          self.r->label_keep.push_back(x);
        }
      })
      .def("label_all", [](PyRecorder& self, py::list tensors, py::dict labels_by_id) {
        // label() for each tensor of the trace's list, its (kind, name) by id(tensor): one
        // call for a model's hundreds of parameters and buffers
        auto& labels = self.r->labels;
        for (auto item : tensors) {
          at::Tensor x = THPVariable_Unpack(item.ptr());
          if (labels.find(x.unsafeGetTensorImpl()) != labels.end()) continue;
          auto pair = labels_by_id[py::int_(reinterpret_cast<uintptr_t>(item.ptr()))].cast<py::tuple>();
          labels.emplace(x.unsafeGetTensorImpl(), std::make_pair(pair[0].cast<std::string>(), pair[1].cast<std::string>()));
          self.r->label_keep.push_back(x);
        }
      })
      .def("start", [](PyRecorder& self, py::object outer) {
        if (active) throw std::runtime_error("a native recording is already running");
        Recorder& r = *self.r;
        r.reserve();
        r.outer = outer.ptr();
        active = self.r.get();
        tl_owner = true;
        // thread-local: this thread's ops only (other threads' are not the recording's)
        handle = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                           .needsInputs(true)
                                           .needsOutputs(true)
                                           .scopes({at::RecordScope::FUNCTION}));
      })
      .def("stop", [](PyRecorder& self) {
        if (handle) at::removeCallback(handle);  // this thread's, as start registered it
        handle = 0;
        self.r->rf_off = false;
        if (active == self.r.get()) active = nullptr;
        tl_owner = false;
        self.r->outer = nullptr;
        self.r->top = Frame{};
        self.r->open.clear();
        self.r->pending.clear();
        self.r->purge_dead();  // what the recording's dead tensors still hold
      })
      .def("set_top", [](PyRecorder& self, int64_t group, py::object stop, int64_t stop_fid, bool stop_lib) {
        Recorder& r = *self.r;
        r.group = group;
        r.top.stop = stop.is_none() ? nullptr : reinterpret_cast<PyFrameObject*>(stop.ptr());
        r.top.stop_fid = stop_fid;
        r.top.stop_lib = stop_lib;
      })
      .def("pause", [](PyRecorder& self) { ++self.r->paused; })
      .def("resume", [](PyRecorder& self) { --self.r->paused; })
      .def("value_of", [](PyRecorder& self, py::object t) {
        at::Tensor x = THPVariable_Unpack(t.ptr());
        OwnCalls own;
        int64_t vid = self.r->value_of(x);
        self.r->note();
        return vid;
      })
      .def("data_of", [](PyRecorder& self, py::object src, py::object out) {
        OwnCalls own;
        self.r->data_of(THPVariable_Unpack(src.ptr()), THPVariable_Unpack(out.ptr()));
        self.r->note();
      })
      .def("share_state", [](PyRecorder& self, py::object buffer) {
        // The state shared with Python (Recorder::state): a writable buffer of three int64s.
        auto view = std::make_unique<py::buffer_info>(py::buffer(buffer).request(true));
        if (view->itemsize != 8 || view->size != 3) throw std::invalid_argument("the state needs three 8-byte items");
        self.r->state = static_cast<int64_t*>(view->ptr);
        self.r->state_view = std::move(view);
        self.r->note();
      })
      .def("set_hooks", [](PyRecorder& self, py::dict cfg) {
        auto& h = self.r->hooks;
        // the trace's own tables, read and written in place with CPython's list and dict calls
        auto table = [&](const char* key, bool list) {
          py::object o = cfg[key];
          if (list ? !PyList_CheckExact(o.ptr()) : !PyDict_CheckExact(o.ptr()))
            throw std::invalid_argument(std::string("set_hooks: ") + key + (list ? " must be a list" : " must be a dict"));
          return o;
        };
        h.paths = table("paths", false);
        h.calls = table("calls", false);
        h.class_attrs = table("class_attrs", false);
        h.stack = table("stack", true);
        h.groups = table("groups", true);
        h.values = table("values", true);
        h.frames = table("frames", true);
        h.class_template_cb = cfg["class_template"];
        h.limit_cb = cfg["limit"];
        h.sync_cb = cfg["sync"];
        h.tree_cb = cfg["tree"];
        h.tensor_type = cfg["tensor"];
        h.group_cls.init(cfg["group"]);
        h.max_groups = cfg["max_groups"].cast<int64_t>();
        h.module_kind = py::str("module");
        h.outputs_key = py::str("outputs");
        h.value_key = py::str("value");
        h.bytes_key = py::str("bytes");
        h.bytes_key_result = py::str("result_bytes");
        h.path_key = py::str("path");
        h.call_key = py::str("call");
        h.frame_key = py::str("frame");
        h.attrs_name = py::str("attrs");
        h.measured_name = py::str("measured");
        h.library_name = py::str("library");
      })
      .def("pre_hook", [](PyRecorder& self, py::handle module, py::handle) { self.r->pre_hook(module.ptr()); })
      .def("post_hook", [](PyRecorder& self, py::handle module, py::handle, py::handle output) {
        self.r->post_hook(module.ptr(), output.ptr());
      })
      .def("set_functions", [](PyRecorder& self, py::object cfg) {
        // the function mode's tables and callbacks (Recorder::Functions), or None: off
        auto& f = self.r->fm;
        if (cfg.is_none()) {
          f = Recorder::Functions{};
          return;
        }
        if (!self.r->hooks.stack || !self.r->state) throw std::runtime_error("set_functions needs set_hooks and share_state first");
        py::dict d = cfg.cast<py::dict>();
        f.names = d["names"];
        if (!PyDict_CheckExact(f.names.ptr())) throw std::invalid_argument("set_functions: names must be a dict");
        f.calls = d["calls"];
        if (!PyList_CheckExact(f.calls.ptr())) throw std::invalid_argument("set_functions: calls must be a list");
        f.public_name_cb = d["public_name"];
        f.ran_cb = d["ran"];
        f.data_name = d["data"];
        f.function_kind = d["kind"];
        f.on = true;
      })
      .def("torch_function", [](PyRecorder& self) {
        // the handler (torch_function_fast), to be bound to the mode (types.MethodType):
        // PyTorch calls a mode's handler only if its __self__ is the mode
        return bound_to(&torch_function_def, self.r);
      })
      .def("module_call", [](PyRecorder& self, py::dict cfg) {
        // module_call_fast over this recorder, to be bound to each module (types.MethodType)
        auto& m = self.r->mc;
        m.call_impl = cfg["call_impl"];
        m.fwd = cfg["forward_hooks"];
        m.fwd_pre = cfg["forward_pre_hooks"];
        m.bwd = cfg["backward_hooks"];
        m.bwd_pre = cfg["backward_pre_hooks"];
        for (const py::object* d : {&m.fwd, &m.fwd_pre, &m.bwd, &m.bwd_pre})
          if (!PyDict_Check(d->ptr())) throw std::invalid_argument("module_call: the global hooks must be dicts");
        m.forward_name = py::str("forward");
        const char* own[4] = {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"};
        for (int i = 0; i < 4; ++i) m.own_hooks[i] = py::reinterpret_steal<py::object>(PyUnicode_InternFromString(own[i]));
        return bound_to(&module_call_def, self.r);
      })
      .def("known", [](PyRecorder& self, py::object t) {
        at::Tensor x = THPVariable_Unpack(t.ptr());
        return self.r->live.count(x.unsafeGetTensorImpl()) > 0;
      })
      .def("counts", [](PyRecorder& self) { return py::make_tuple(self.r->n_values, self.r->n_nodes); })
      .def("skipped", [](PyRecorder& self) { return self.r->skipped; })
      .def("targets", [](PyRecorder& self, py::list v, py::list n, py::list vs, py::list ow, py::list pr,
                         py::list bo) { self.r->targets = {v, n, vs, ow, pr, bo}; })
      .def("release", [](PyRecorder& self) {
        // Frees every table (the graph is built: nothing more is recorded or looked up);
        // the Python side never calls this object again.
        if (active == self.r.get()) throw std::runtime_error("the native recorder is still recording");
        self.r.reset();
      })
      .def("flush", [](PyRecorder& self) {
        auto& t = self.r->targets;
        return self.r->flush(t[0], t[1], t[2], t[3], t[4], t[5]);
      });
  m.def("busy", []() { return active != nullptr; });
  m.def("callbacks_alone", [](bool on) {
    // the probe above on or off (a benchmark's floor; never while recording)
    if (on && active) throw std::runtime_error("a native recording is running");
    if (on && !probe_handle)
      probe_handle = at::addThreadLocalCallback(at::RecordFunctionCallback(&probe_start, &probe_end)
                                               .needsInputs(true)
                                               .needsOutputs(true)
                                               .scopes({at::RecordScope::FUNCTION}));
    if (!on && probe_handle) {
      at::removeCallback(probe_handle);
      probe_handle = 0;
    }
  });
}
