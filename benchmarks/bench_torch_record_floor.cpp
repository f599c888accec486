// The C++ RecordFunction recorder of bench_torch_record_floor.py (built there with
// torch.utils.cpp_extension.load_inline; a benchmark, not TensorViz's capture).
#include <torch/extension.h>
#include <ATen/record_function.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <Python.h>
#include <frameobject.h>
#include <cmath>
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
  std::vector<double> t_stats;      // per output: min, max, sum, sum of squares (NaN: not measured here)
  std::vector<PyObject*> frame_code;
  std::vector<int32_t> frame_lasti;
  std::vector<int64_t> scope_key;
  std::vector<int32_t> scope_parent;
};

Columns cols;
// Per overload (keyed by the schema's name string): its row in `names`, and whether it is
// CompositeImplicitAutograd (it decomposes above the Python key: a dispatch mode sees only
// what it calls).
struct NameInfo {
  int32_t index;
  bool composite;
};
std::unordered_map<const char*, NameInfo> name_index;
std::vector<std::string> names;
std::unordered_map<const c10::TensorImpl*, int64_t> live;
std::unordered_map<uint64_t, int32_t> frame_index;
std::unordered_map<PyObject*, bool> code_is_library;
// The events open on this thread: the op's row (-1: not a graph op, not recorded), and
// whether the ops it calls are graph ops (it is composite and so is everything above it).
struct Open {
  int32_t row;
  bool children_visible;
};
std::vector<Open> open_ops;
int64_t events = 0;
int64_t stats_measured = 0, stats_shared = 0, stats_copied = 0, stats_elements = 0;
int32_t top_frame = -1, top_user_frame = -1;  // the frames of the open top-level event
int64_t next_id = 1;
int32_t current_scope = -1;
bool stats_on = false;  // the four moments of every floating output, in the callback
int frames_mode = 0;  // -1 record nothing (the mechanism's own cost), 0 no frames, 1 innermost frame,
                      // 2 and the first frame outside the libraries
at::CallbackHandle handle = 0;

const NameInfo& intern_name(const at::RecordFunction& fn) {
  const char* n = fn.name();
  auto it = name_index.find(n);
  if (it != name_index.end()) return it->second;
  std::string full(n);
  auto op = fn.operator_name();
  full += ".";
  full += (op && !op->overload_name.empty()) ? op->overload_name : std::string("default");
  bool composite = false;
  if (op) {
    auto handle = c10::Dispatcher::singleton().findOp(*op);
    composite = handle && handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
  }
  int32_t i = static_cast<int32_t>(names.size());
  names.push_back(full);
  return name_index.emplace(n, NameInfo{i, composite}).first->second;
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

void record_frames() {
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
  top_frame = inner;
  top_user_frame = user;
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

// Min, max, sum and sum of squares of n floats in one pass: 8 lanes in float over chunks
// of 2048 (vectorizable at -O2 -ftree-vectorize), each chunk's sums added in double.
template <typename T>
void moments(const T* p, int64_t n, double* out) {
  constexpr int L = 8;
  float mn[L], mx[L];
  for (int l = 0; l < L; ++l) { mn[l] = INFINITY; mx[l] = -INFINITY; }
  double s = 0.0, q = 0.0;
  int64_t i = 0;
  for (; i + 2048 <= n; i += 2048) {
    float cs[L] = {0}, cq[L] = {0};
    for (int64_t j = 0; j < 2048; j += L) {
      for (int l = 0; l < L; ++l) {
        float v = static_cast<float>(p[i + j + l]);
        mn[l] = v < mn[l] ? v : mn[l];
        mx[l] = v > mx[l] ? v : mx[l];
        cs[l] += v;
        cq[l] += v * v;
      }
    }
    for (int l = 0; l < L; ++l) { s += cs[l]; q += cq[l]; }
  }
  float a = INFINITY, b = -INFINITY;
  for (int l = 0; l < L; ++l) { a = mn[l] < a ? mn[l] : a; b = mx[l] > b ? mx[l] : b; }
  for (; i < n; ++i) {
    double v = static_cast<double>(p[i]);
    a = v < a ? static_cast<float>(v) : a;
    b = v > b ? static_cast<float>(v) : b;
    s += v;
    q += v * v;
  }
  out[0] = a; out[1] = b; out[2] = s; out[3] = q;
}

// The same for float32 with GCC/Clang vector types (the loop above stays scalar): 2 x 4
// lanes of min, max, sum, sum of squares over chunks of 1024, each chunk's sums in double.
typedef float v4f __attribute__((vector_size(16)));

void moments_f32(const float* p, int64_t n, double* out) {
  v4f mn0 = {INFINITY, INFINITY, INFINITY, INFINITY}, mn1 = mn0, mx0 = -mn0, mx1 = -mn0;
  double s = 0.0, q = 0.0;
  int64_t i = 0;
  for (; i + 1024 <= n; i += 1024) {
    v4f s0 = {0, 0, 0, 0}, s1 = s0, q0 = s0, q1 = s0;
    for (int64_t j = 0; j < 1024; j += 8) {
      v4f a, b;
      std::memcpy(&a, p + i + j, sizeof a);
      std::memcpy(&b, p + i + j + 4, sizeof b);
      mn0 = a < mn0 ? a : mn0;
      mn1 = b < mn1 ? b : mn1;
      mx0 = a > mx0 ? a : mx0;
      mx1 = b > mx1 ? b : mx1;
      s0 += a;
      s1 += b;
      q0 += a * a;
      q1 += b * b;
    }
    for (int l = 0; l < 4; ++l) {
      s += static_cast<double>(s0[l]) + static_cast<double>(s1[l]);
      q += static_cast<double>(q0[l]) + static_cast<double>(q1[l]);
    }
  }
  float lo = INFINITY, hi = -INFINITY;
  for (int l = 0; l < 4; ++l) {
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
  out[0] = lo; out[1] = hi; out[2] = s; out[3] = q;
}

// An output's moments, in the callback: the data it had when it was made. A view over an
// input's storage with as many elements is that input's values (its statistics shared).
void output_stats(const at::Tensor& t, int64_t in_begin, int64_t in_end, int32_t op) {
  double m[4] = {NAN, NAN, NAN, NAN};
  auto st = t.scalar_type();
  bool shared = false;
  if (t.has_storage()) {
    auto storage = reinterpret_cast<int64_t>(t.storage().unsafeGetStorageImpl());
    for (int64_t i = in_begin; i < in_end && !shared; ++i) {
      if (cols.t_op[i] == op && cols.t_role[i] == 0 && cols.t_storage[i] == storage) {
        int64_t rank = cols.shapes[cols.t_shape_begin[i]], numel = 1;
        for (int64_t d = 0; d < rank; ++d) numel *= cols.shapes[cols.t_shape_begin[i] + 1 + d];
        shared = numel == t.numel();
      }
    }
  }
  stats_shared += shared;
  if (!shared && t.numel() > 0 && (st == at::kFloat || st == at::kDouble || st == at::kBFloat16 || st == at::kHalf) &&
      t.device().is_cpu()) {
    ++stats_measured;
    stats_copied += !t.is_contiguous();
    stats_elements += t.numel();
    at::Tensor c = t.is_contiguous() ? t : t.contiguous();
    if (st == at::kFloat) moments_f32(c.const_data_ptr<float>(), c.numel(), m);
    else if (st == at::kDouble) moments(c.const_data_ptr<double>(), c.numel(), m);
    else if (st == at::kBFloat16) moments(c.const_data_ptr<at::BFloat16>(), c.numel(), m);
    else moments(c.const_data_ptr<at::Half>(), c.numel(), m);
  }
  cols.t_stats.insert(cols.t_stats.end(), m, m + 4);
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
  ++events;
  // A graph op: every event above it is composite (or there is none), and it is not: what a
  // TorchDispatchMode sees. The ops a kernel calls inside are not graph ops.
  const NameInfo& info = intern_name(fn);
  bool above = open_ops.empty() || open_ops.back().children_visible;
  if (frames_mode > 0 && open_ops.empty()) record_frames();  // nested ops share their caller's frame
  if (!above || info.composite) {
    open_ops.push_back(Open{-1, above && info.composite});
    return nullptr;
  }
  int32_t op = static_cast<int32_t>(cols.op_name.size());
  cols.op_name.push_back(info.index);
  cols.op_parent.push_back(-1);
  cols.op_depth.push_back(static_cast<int32_t>(open_ops.size()));
  cols.op_scope.push_back(current_scope);
  cols.op_tensor_begin.push_back(static_cast<int64_t>(cols.t_op.size()));
  cols.op_first_id.push_back(next_id);
  cols.op_frame.push_back(frames_mode > 0 ? top_frame : -1);
  cols.op_user_frame.push_back(frames_mode > 1 ? top_user_frame : -1);
  open_ops.push_back(Open{op, false});
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
  int32_t op = open_ops.back().row;
  open_ops.pop_back();
  if (op < 0) return;
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
      if (stats_on) output_stats(t, in_begin, in_end, op);
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
  events = 0;
  stats_measured = stats_shared = stats_copied = stats_elements = 0;
  top_frame = top_user_frame = -1;
  next_id = 1;
  current_scope = -1;
}

void start(int64_t frames, int64_t reserve, bool stats) {
  reset();
  frames_mode = static_cast<int>(frames);
  stats_on = stats;
  cols.t_stats.reserve(stats ? 8 * reserve : 0);
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
  d["events"] = events;
  d["stats"] = std::vector<int64_t>{stats_measured, stats_shared, stats_copied, stats_elements};
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
  d["t_stats"] = column(cols.t_stats, at::kDouble);
  d["scope_key"] = column(cols.scope_key, at::kLong);
  d["scope_parent"] = column(cols.scope_parent, at::kInt);
  py::list codes;
  for (PyObject* c : cols.frame_code) codes.append(py::reinterpret_borrow<py::object>(c));
  d["frame_code"] = codes;
  d["frame_lasti"] = column(cols.frame_lasti, at::kInt);
  return d;
}

}  // namespace

std::vector<double> moments_of(const at::Tensor& t) {
  std::vector<double> out(4, NAN);
  at::Tensor c = t.contiguous();
  auto st = c.scalar_type();
  if (st == at::kFloat) moments_f32(c.const_data_ptr<float>(), c.numel(), out.data());
  else if (st == at::kDouble) moments(c.const_data_ptr<double>(), c.numel(), out.data());
  else if (st == at::kBFloat16) moments(c.const_data_ptr<at::BFloat16>(), c.numel(), out.data());
  else if (st == at::kHalf) moments(c.const_data_ptr<at::Half>(), c.numel(), out.data());
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("moments", &moments_of, "min, max, sum, sum of squares in one pass");
  m.def("start", &start, "start recording (frames: -1 record nothing, 0 no frames, 1 innermost, 2 and first user frame)");
  m.def("stop", &stop, "stop recording; the columns");
  m.def("push_scope", &push_scope);
  m.def("pop_scope", &pop_scope);
}
