// ONNX Runtime custom-op glue shared by every operator: statuses, attribute probing, inputs,
// the output, the thread pool, and the OrtCustomOp record. Operator knowledge (names,
// attributes, checks, messages, variants) is generated from spec.py and level-2 IR.
//
// Built against ORT_API_VERSION 21 headers; loads in any runtime that serves API 21.

namespace lossgrad {

const OrtApi* g_api = nullptr;  // set once in RegisterCustomOps

inline OrtStatus* invalid(const std::string& message) {
  return g_api->CreateStatus(ORT_INVALID_ARGUMENT, message.c_str());
}

inline OrtStatus* failure(const std::string& message) {
  return g_api->CreateStatus(ORT_FAIL, message.c_str());
}

#define LOSSGRAD_TRY(expr)                  \
  do {                                      \
    if (OrtStatus* _s = (expr)) return _s;  \
  } while (0)

// ------------------------------------------------------------------------------ attributes
//
// What a custom-op kernel can learn about its node's attributes (ORT 1.21-1.31, API 21-31):
// only what it asks for by name. OrtKernelInfo has typed getters (KernelInfoGetAttribute_int64,
// _float, _string, _tensor, and the list getters KernelInfoGetAttributeArray_int64/_float) and
// no call that lists a node's attributes or reports an attribute's ONNX type; the schema ORT
// builds for custom ops allows unchecked attributes (AllowUncheckedAttributes in
// custom_ops.cc); ORT resolves every ai.lossgrad import >= 1 to that schema's since-version,
// so the model's opset version never reaches the kernel either. Hence:
//  * the type: the scalar getters check the attribute's ONNX type (INT, FLOAT, STRING,
//    TENSOR); the list getters do not (any present attribute answers with its ints or
//    floats), but ORT's loader rejects an attribute whose data field is not of its type, so
//    a non-empty list is an INTS or a FLOATS. Presence is exact; what remains (STRINGS,
//    GRAPH, TENSORS, ..., or an empty list) is reported as such, never as a wrong type;
//  * unknown names: every name spec gives any ai.lossgrad attribute, and its usual
//    respellings, is asked for; another name cannot be seen (the Python entry points, which
//    read the whole NodeProto, reject it).

// The ONNX type of a node attribute as far as the kernel API shows it.
enum class AttrType { kAbsent, kInt, kFloat, kString, kTensor, kInts, kFloats, kUnreadable };

inline const char* onnx_attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kInt: return "INT";
    case AttrType::kFloat: return "FLOAT";
    case AttrType::kString: return "STRING";
    case AttrType::kTensor: return "TENSOR";
    case AttrType::kInts: return "INTS";
    case AttrType::kFloats: return "FLOATS";
    case AttrType::kUnreadable:
      return "STRINGS or another list or graph type (ONNX Runtime does not tell kernels which)";
    default: return "UNDEFINED";
  }
}

struct AttrValue {
  AttrType type = AttrType::kAbsent;
  int64_t i = 0;
  float f = 0.0f;
  std::string s;  // every byte of a STRING, NULs included
};

inline bool succeeded(OrtStatus* status) {
  if (!status) return true;
  g_api->ReleaseStatus(status);
  return false;
}

// The number of elements a list getter reports, or false when the node has no attribute of
// this name (the only case in which ORT's list getters fail a size query).
template <class Getter>
inline bool list_size(const OrtKernelInfo* info, const char* name, Getter get, size_t* size) {
  *size = 0;
  return succeeded(get(info, name, nullptr, size));
}

inline bool attribute_present(const OrtKernelInfo* info, const char* name) {
  size_t size = 0;
  return list_size(info, name, g_api->KernelInfoGetAttributeArray_int64, &size);
}

inline bool read_string(const OrtKernelInfo* info, const char* name, std::string* out) {
  size_t size = 0;  // the value's length + 1
  if (!succeeded(g_api->KernelInfoGetAttribute_string(info, name, nullptr, &size)) || size == 0)
    return false;
  std::vector<char> buf(size, '\0');
  if (!succeeded(g_api->KernelInfoGetAttribute_string(info, name, buf.data(), &size)) ||
      size == 0 || size > buf.size())
    return false;
  out->assign(buf.data(), size - 1);
  return true;
}

inline bool is_tensor(const OrtKernelInfo* info, const char* name) {
  OrtAllocator* allocator = nullptr;
  OrtValue* tensor = nullptr;
  if (!succeeded(g_api->GetAllocatorWithDefaultOptions(&allocator)) ||
      !succeeded(g_api->KernelInfoGetAttribute_tensor(info, name, allocator, &tensor)))
    return false;
  g_api->ReleaseValue(tensor);
  return true;
}

inline AttrValue read_attribute(const OrtKernelInfo* info, const char* name) {
  AttrValue v;
  size_t ints = 0;
  size_t floats = 0;
  if (!list_size(info, name, g_api->KernelInfoGetAttributeArray_int64, &ints)) return v;
  if (ints > 0) {
    v.type = AttrType::kInts;
  } else if (succeeded(g_api->KernelInfoGetAttribute_int64(info, name, &v.i))) {
    v.type = AttrType::kInt;
  } else if (succeeded(g_api->KernelInfoGetAttribute_float(info, name, &v.f))) {
    v.type = AttrType::kFloat;
  } else if (read_string(info, name, &v.s)) {
    v.type = AttrType::kString;
  } else if (list_size(info, name, g_api->KernelInfoGetAttributeArray_float, &floats) &&
             floats > 0) {
    v.type = AttrType::kFloats;
  } else if (is_tensor(info, name)) {
    v.type = AttrType::kTensor;
  } else {
    v.type = AttrType::kUnreadable;
  }
  return v;
}

// ------------------------------------------------------------------------------ inputs

struct Input {
  bool present = false;
  const void* data = nullptr;
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  lossgrad_shapes::Dims dims;  // of a rank above kMaxRank, only the rank
};

inline OrtStatus* read_input(OrtKernelContext* ctx, size_t index, Input* in) {
  const OrtValue* value = nullptr;
  LOSSGRAD_TRY(g_api->KernelContext_GetInput(ctx, index, &value));
  if (!value) return nullptr;
  OrtTensorTypeAndShapeInfo* info = nullptr;
  LOSSGRAD_TRY(g_api->GetTensorTypeAndShape(value, &info));
  size_t rank = 0;
  OrtStatus* status = g_api->GetTensorElementType(info, &in->type);
  if (!status) status = g_api->GetDimensionsCount(info, &rank);
  if (!status) {
    in->dims.rank = rank;
    if (rank <= lossgrad_shapes::kMaxRank)
      status = g_api->GetDimensions(info, in->dims.extent, rank);
  }
  g_api->ReleaseTensorTypeAndShapeInfo(info);
  LOSSGRAD_TRY(status);
  void* data = nullptr;  // API 21 has no const accessor; inputs are never written
  LOSSGRAD_TRY(g_api->GetTensorMutableData(const_cast<OrtValue*>(value), &data));
  in->present = true;
  in->data = data;
  return nullptr;
}

// The storage type of a float tensor (false for any other type).
inline bool element_of(ONNXTensorElementDataType type, Element* element) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: *element = Element::kFloat16; return true;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: *element = Element::kBFloat16; return true;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: *element = Element::kFloat32; return true;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: *element = Element::kFloat64; return true;
    default: return false;
  }
}

inline bool is_float(ONNXTensorElementDataType type) {
  Element element;
  return element_of(type, &element);
}

// Whether any input given is a double tensor: the compute type of an operator whose
// optional inputs take part in the promotion (the others decide it at registration).
inline OrtStatus* any_double_input(OrtKernelContext* ctx, bool* wide) {
  size_t count = 0;
  LOSSGRAD_TRY(g_api->KernelContext_GetInputCount(ctx, &count));
  *wide = false;
  for (size_t i = 0; i < count; ++i) {
    const OrtValue* value = nullptr;
    LOSSGRAD_TRY(g_api->KernelContext_GetInput(ctx, i, &value));
    if (!value) continue;
    OrtTensorTypeAndShapeInfo* info = nullptr;
    LOSSGRAD_TRY(g_api->GetTensorTypeAndShape(value, &info));
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    OrtStatus* status = g_api->GetTensorElementType(info, &type);
    g_api->ReleaseTensorTypeAndShapeInfo(info);
    LOSSGRAD_TRY(status);
    if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) *wide = true;
  }
  return nullptr;
}

// The compute type of an operator with optional inputs, as the node's declared input types
// decide it: read once, when ORT creates the kernel, so that a call does not ask each input
// for its type a second time (check_<op> reads them anyway). ORT runs a node only with the
// types its graph declares; where the graph does not say (kAtRun), each call asks
// (any_double_input). Whatever is decided here, run_variant still refuses an input the
// chosen kernel cannot load.
enum class Promotion { kFloat, kDouble, kAtRun };

inline Promotion declared_promotion(const OrtKernelInfo* info) {
  size_t count = 0;
  if (OrtStatus* s = g_api->KernelInfo_GetInputCount(info, &count)) {
    g_api->ReleaseStatus(s);
    return Promotion::kAtRun;
  }
  bool wide = false;
  for (size_t i = 0; i < count; ++i) {
    size_t name_size = 0;  // with its terminating null: 1 for an absent optional input
    OrtStatus* status = g_api->KernelInfo_GetInputName(info, i, nullptr, &name_size);
    if (!status && name_size <= 1) continue;
    OrtTypeInfo* type_info = nullptr;
    if (!status) status = g_api->KernelInfo_GetInputTypeInfo(info, i, &type_info);
    const OrtTensorTypeAndShapeInfo* tensor = nullptr;
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    if (!status) status = g_api->CastTypeInfoToTensorInfo(type_info, &tensor);
    if (!status && tensor) status = g_api->GetTensorElementType(tensor, &type);
    if (type_info) g_api->ReleaseTypeInfo(type_info);
    const bool unknown = status || type == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    if (status) g_api->ReleaseStatus(status);
    if (unknown) return Promotion::kAtRun;
    if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) wide = true;
  }
  return wide ? Promotion::kDouble : Promotion::kFloat;
}

// Whether values stored as `element` convert exactly into the load type L (arith.extf or
// none). The registrations admit only such inputs; this guards the kernels' loads all the same.
template <class L>
inline bool widens_into(Element element) {
  if constexpr (std::is_same_v<L, double>) return true;
  if constexpr (std::is_same_v<L, float>) return element != Element::kFloat64;
  if constexpr (std::is_same_v<L, float16>) return element == Element::kFloat16;
  if constexpr (std::is_same_v<L, bfloat16>) return element == Element::kBFloat16;
  return false;
}

// A checked shape (rank at most kMaxRank) as the iteration code holds it.
inline Shape to_shape(const lossgrad_shapes::Dims& dims) {
  Shape s;
  s.rank = static_cast<int>(dims.rank);
  for (int a = 0; a < s.rank; ++a) s.dim[a] = dims.extent[a];
  return s;
}

// The result of a KL op is summed when its operand lacks a leading axis of the iteration
// space or is 1 where the space is not (reference.sum_to_shape's rule).
inline bool is_summed(const Shape& result, const Shape& space) {
  if (result.rank < space.rank) return true;
  for (int a = 0; a < result.rank; ++a)
    if (result.dim[a] == 1 && space.dim[a] != 1) return true;
  return false;
}

// ------------------------------------------------------------------------------ execution

// Runs range(begin, end) over [0, total) in fixed chunks on the session's intra-op pool.
struct Job {
  int64_t total = 0;
  int64_t chunk = 1;
  const void* state = nullptr;
  void (*range)(const void* state, int64_t begin, int64_t end) = nullptr;
};

inline void run_chunk(void* job, size_t i) {
  const Job& j = *static_cast<const Job*>(job);
  const int64_t begin = static_cast<int64_t>(i) * j.chunk;
  j.range(j.state, begin, std::min(j.total, begin + j.chunk));
}

constexpr int64_t kChunkElements = int64_t{1} << 15;  // per task: 32K iteration points
// A streamed task ends with a store fence, which waits for its streamed lines to reach memory:
// one every 32K elements made a C loop of MseLossBackward's float32 body slower at 2^22
// (docs/benchmarks.md, "The figures behind the kernels' choices").
// ORT hands each thread one run of consecutive tasks (KernelContext_ParallelFor's batches),
// so larger tasks cost no balance.
constexpr int64_t kStreamChunkElements = int64_t{1} << 18;

inline OrtStatus* run_job(OrtKernelContext* ctx, Job& job) {
  if (job.total <= 0) return nullptr;
  const int64_t tasks = (job.total + job.chunk - 1) / job.chunk;
  if (tasks == 1) {
    job.range(job.state, 0, job.total);
    return nullptr;
  }
  return g_api->KernelContext_ParallelFor(ctx, run_chunk, static_cast<size_t>(tasks), 0, &job);
}

template <class V>
struct ElementwiseState {
  const Layout* l;  // run_variant's, which outlives the job
  typename V::Params p;
  bool stream;  // the result is written with non-temporal stores (stream.h)
  static void range(const void* s, int64_t begin, int64_t end) {
    const auto& st = *static_cast<const ElementwiseState*>(s);
    elementwise_range<V>(*st.l, st.p, begin, end, st.stream);
  }
};

template <class V>
struct ReduceState {
  ReduceLayout r;
  typename V::Params p;
  static void range(const void* s, int64_t begin, int64_t end) {
    const auto& st = *static_cast<const ReduceState*>(s);
    reduce_range<V>(st.r, st.p, begin, end);
  }
};

// One call of a kernel after validation: shapes, data, output, iteration space.
struct Call {
  OrtKernelContext* ctx = nullptr;
  Shapes shapes;
  const void* data[kNumOperands] = {};
  ONNXTensorElementDataType type[kNumOperands] = {};
  Shape space;   // the iteration space
  Shape result;  // the output's shape
  void* out = nullptr;
  bool reduces = false;  // the result is summed over some iteration axes
  // The operands are the inputs given, in the operator's order (an absent optional input
  // takes no place); `given` has bit k set for the operator's k-th optional input given.
  int operands = 0;
  unsigned given = 0;
  // Which rank-0 pattern the operands show: bit 0 self is 0-d, bit 1 target is 0-d.
  int rank0_pattern() const {
    return (shapes.operand[1].rank == 0 ? 1 : 0) | (shapes.operand[2].rank == 0 ? 2 : 0);
  }
};

// Bytes a call moves: the operands the body reads and the result.
template <class V>
int64_t bytes_moved(const Call& c, const Element* element) {
  static constexpr int64_t kSize[] = {2, 2, 4, 8};  // Element's order
  const bool* uses = kUses<V>;
  int64_t bytes = c.result.numel() * int64_t{sizeof(typename V::Out)};
  for (int op = 0; op < kNumOperands; ++op)
    if (uses[op]) bytes += c.shapes.operand[op].numel() * kSize[static_cast<int>(element[op])];
  return bytes;
}

template <class V>
OrtStatus* run_variant(Call& c, const typename V::Params& p) {
  if (c.result.numel() == 0) return nullptr;
  Element element[kNumOperands] = {};
  for (int op = 0; op < c.operands; ++op)
    if (!element_of(c.type[op], &element[op]))
      return failure("lossgrad: an input is not a float tensor");
  if ((V::kUses0 && !widens_into<typename V::L0>(element[0])) ||
      (V::kUses1 && !widens_into<typename V::L1>(element[1])) ||
      (V::kUses2 && !widens_into<typename V::L2>(element[2])) ||
      (V::kUses3 && !widens_into<typename V::L3>(element[3])) ||
      (V::kUses4 && !widens_into<typename V::L4>(element[4])))
    return failure("lossgrad: an input type does not widen into the kernel's load type");
  Layout l = make_layout(c.space, c.shapes, c.data, element, c.out);
  forget_unused<V>(l);
  Job job;
  if constexpr (V::kReduces) {
    ReduceState<V> st{make_reduce_layout(l, c.result), p};
    job.total = c.result.numel();
    job.chunk = std::max<int64_t>(1, kChunkElements / std::max<int64_t>(1, st.r.reduced_count));
    job.state = &st;
    job.range = &ReduceState<V>::range;
    return run_job(c.ctx, job);
  } else {
    coalesce(l);
    const bool stream = kMayStream<V> && bytes_moved<V>(c, element) > stream_above_bytes();
    ElementwiseState<V> st{&l, p, stream};
    job.total = c.result.numel();
    job.chunk = stream ? kStreamChunkElements : kChunkElements;
    job.state = &st;
    job.range = &ElementwiseState<V>::range;
    return run_job(c.ctx, job);
  }
}

// ------------------------------------------------------------------------------ custom ops

using CreateFn = OrtStatus* (*)(const OrtKernelInfo* info, void** kernel);
using ComputeFn = OrtStatus* (*)(const void* kernel, OrtKernelContext* ctx);
using DestroyFn = void (*)(void* kernel);

struct Kernel {
  ComputeFn compute;
  DestroyFn destroy;
  void* state;
};

struct CustomOp : OrtCustomOp {
  const char* op_name;
  int since_version;  // the ai.lossgrad version that introduced the operator
  size_t inputs;      // the operator's inputs; those from `optional` on may be absent
  size_t optional;
  ONNXTensorElementDataType input_types[kNumOperands];
  ONNXTensorElementDataType output_type;
  CreateFn create;
  ComputeFn compute;
  DestroyFn destroy;
};

inline const CustomOp& self_of(const OrtCustomOp* op) { return *static_cast<const CustomOp*>(op); }

// One registration of `name` for one combination of required input types, with the result
// type spec gives them. ORT keeps one kernel definition per registration, picks one by the
// node's input types and takes the output type from it. An optional input is registered
// with any type (UNDEFINED): its type cannot change the result type (the operators with
// optional inputs return self's type), the kernel checks it with spec's message, and one
// registration per combination of every input's type would be 4^5 per operator, which ORT
// re-creates for every session.
inline CustomOp make_custom_op(const char* name, int since_version,
                               std::initializer_list<ONNXTensorElementDataType> inputs,
                               size_t optional, ONNXTensorElementDataType output,
                               CreateFn create, ComputeFn compute, DestroyFn destroy) {
  CustomOp op;
  std::memset(static_cast<OrtCustomOp*>(&op), 0, sizeof(OrtCustomOp));  // unset hooks stay null
  op.version = ORT_API_VERSION;
  op.op_name = name;
  op.since_version = since_version;
  op.inputs = inputs.size();
  op.optional = optional;
  std::fill(std::begin(op.input_types), std::end(op.input_types),
            ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED);
  std::copy(inputs.begin(), inputs.end(), op.input_types);
  op.output_type = output;
  op.create = create;
  op.compute = compute;
  op.destroy = destroy;
  op.GetName = [](const OrtCustomOp* o) { return self_of(o).op_name; };
  op.GetExecutionProviderType = [](const OrtCustomOp*) { return "CPUExecutionProvider"; };
  op.GetInputTypeCount = [](const OrtCustomOp* o) -> size_t { return self_of(o).inputs; };
  op.GetOutputTypeCount = [](const OrtCustomOp*) -> size_t { return 1; };
  op.GetInputType = [](const OrtCustomOp* o, size_t i) { return self_of(o).input_types[i]; };
  op.GetOutputType = [](const OrtCustomOp* o, size_t) { return self_of(o).output_type; };
  op.GetInputCharacteristic = [](const OrtCustomOp* o, size_t i) {
    return i >= self_of(o).optional ? OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_OPTIONAL
                                    : OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED;
  };
  op.GetOutputCharacteristic = [](const OrtCustomOp*, size_t) {
    return OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED;
  };
  // Must be set: ORT 1.31 calls it unconditionally.
  op.GetInputMemoryType = [](const OrtCustomOp*, size_t) { return OrtMemTypeDefault; };
  op.CreateKernelV2 = [](const OrtCustomOp* o, const OrtApi*, const OrtKernelInfo* info,
                         void** kernel) -> OrtStatus* {
    const CustomOp& self = self_of(o);
    void* state = nullptr;
    LOSSGRAD_TRY(self.create(info, &state));
    *kernel = new Kernel{self.compute, self.destroy, state};
    return nullptr;
  };
  op.KernelComputeV2 = [](void* kernel, OrtKernelContext* ctx) -> OrtStatus* {
    const Kernel& k = *static_cast<const Kernel*>(kernel);
    return k.compute(k.state, ctx);
  };
  op.KernelDestroy = [](void* kernel) {
    Kernel* k = static_cast<Kernel*>(kernel);
    k->destroy(k->state);
    delete k;
  };
  // The operator's since-version, up to the domain's current version. It documents the
  // kernels; it cannot reject other imports: ORT builds one schema per op name, whose
  // since-version is the start version of the first op registered under that name, resolves
  // every import from there to 1000 to it, and picks kernels by that since-version (a model
  // importing a version below it finds no such op, and the Python entry points reject it
  // first with spec's message). A second op of the same name starting at another version
  // thus never runs, and a second ai.lossgrad domain is refused ("Domain already set in
  // registry").
  op.GetStartVersion = [](const OrtCustomOp* o) { return self_of(o).since_version; };
  op.GetEndVersion = [](const OrtCustomOp*) { return kOpsetVersion; };
  return op;
}

}  // namespace lossgrad
