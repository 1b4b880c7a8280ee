// lossgrad_compiler Ascend C CPU emulation: everything that does not depend on a kernel.
//
// Compiled once into an object that every runner links (the per-signature translation
// unit then only compiles the kernel, its host code and the wrapper).
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "kernel_operator.h"
#include "lossgrad_emu/opapi.h"
#include "lossgrad_emu/runner.h"

namespace lossgrad_emu {

// ------------------------------------------------------------------ state and rules

Platform& platform() {
  static Platform p;
  return p;
}

RunState& state() {
  static RunState s;
  return s;
}

std::vector<Launch>& launches() {
  static std::vector<Launch> l;
  return l;
}

void Violation(const std::string& instruction, const std::string& rule) {
  std::fprintf(stderr, "lossgrad ascendc emulator: kernel %s, block %lld: %s: %s\n", state().kernel.c_str(),
               static_cast<long long>(state().block_idx), instruction.c_str(), rule.c_str());
  std::fflush(stderr);
  std::exit(kViolationExit);
}

// ------------------------------------------------------------------ global memory

static std::map<uintptr_t, uint64_t>& gm_allocations() {
  static std::map<uintptr_t, uint64_t> m;
  return m;
}

void* GmAlloc(uint64_t bytes) {
  // One spare byte keeps zero-byte allocations distinct; it is not part of the allocation.
  auto* p = static_cast<uint8_t*>(std::calloc(bytes + 1, 1));
  gm_allocations()[reinterpret_cast<uintptr_t>(p)] = bytes;
  return p;
}

void GmFree(void* p) {
  if (p == nullptr) return;
  gm_allocations().erase(reinterpret_cast<uintptr_t>(p));
  std::free(p);
}

void CheckGm(const std::string& instruction, const void* address, uint64_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  auto& m = gm_allocations();
  auto it = m.upper_bound(a);
  if (it != m.begin()) {
    --it;
    if (a >= it->first && a + bytes <= it->first + it->second) return;
    if (a >= it->first && a <= it->first + it->second) {
      Violation(instruction, Str("global memory access of ", bytes, " bytes at byte ", a - it->first,
                                 " runs past the end of its ", it->second, "-byte tensor"));
    }
  }
  Violation(instruction, Str("global memory access of ", bytes, " bytes outside every device allocation"));
}

// ------------------------------------------------------------------ unified buffer

Ub& Ub::current() {
  thread_local Ub ub;  // the running core's: a multi-core launch runs each core on its own thread
  return ub;
}

void Ub::Reset(uint64_t capacity) {
  data_.assign(capacity, 0xFF);  // NaN in every float type: reads of unwritten data show
  used_ = 0;
  buffers_.clear();
  queue_buffers_[0] = queue_buffers_[1] = 0;
  active_ = true;
}

Buffer* Ub::Allocate(const char* instruction, uint32_t len, const std::string& owner, bool vecin, bool queue) {
  if (!active_) Violation(instruction, "no TPipe: create the kernel's TPipe before InitBuffer");
  if (len == 0) Violation(instruction, "buffer length must be positive");
  const uint64_t rounded = (static_cast<uint64_t>(len) + kUbAlign - 1) / kUbAlign * kUbAlign;
  if (used_ + rounded > data_.size()) {
    Violation(instruction, Str("buffers need ", used_ + rounded, " bytes of UB but the core has ", data_.size(),
                               " (every buffer is rounded up to 32 bytes)"));
  }
  if (buffers_.size() + 1 > kMaxBuffers) Violation(instruction, Str("more than ", kMaxBuffers, " buffers in one TPipe"));
  if (queue) {
    uint32_t& n = queue_buffers_[vecin ? 0 : 1];
    if (++n > kMaxQueueBuffersPerPosition) {
      Violation(instruction,
                Str("more than ", kMaxQueueBuffersPerPosition, " queue buffers at ", vecin ? "VECIN" : "VECOUT"));
    }
  }
  auto buffer = std::make_unique<Buffer>();
  buffer->offset = static_cast<uint32_t>(used_);
  buffer->bytes = static_cast<uint32_t>(rounded);
  buffer->owner = owner;
  buffer->state = queue ? BufState::Free : BufState::Calc;
  used_ += rounded;
  buffers_.push_back(std::move(buffer));
  return buffers_.back().get();
}

void CheckAllFreed() {
  auto& ub = Ub::current();
  for (const auto& b : ub.buffers()) {
    if (b->state != BufState::Free && b->state != BufState::Calc) {
      Violation("end of kernel", Str(b->owner, " is still ", StateName(b->state),
                                     ": every AllocTensor/DeQue needs its EnQue/FreeTensor (buffer leaked)"));
    }
  }
  ub.set_active(false);
}

const char* StateName(BufState s) {
  switch (s) {
    case BufState::Free: return "FREE";
    case BufState::Occupied: return "OCCUPIED (allocated)";
    case BufState::Enqueued: return "ENQUE (queued)";
    case BufState::Dequeued: return "DEQUE (dequeued)";
    case BufState::Calc: return "TBuf";
  }
  return "?";
}

void CheckPipeUnique() {
  if (Ub::current().active()) Violation("TPipe", "a kernel may create one TPipe");
  Ub::current().Reset(platform().ub_bytes);
}

void CheckLocal(const char* instruction, const Buffer* buffer, uint32_t byte_offset, uint64_t end, bool aligned) {
  if (buffer == nullptr) Violation(instruction, "LocalTensor does not refer to a UB buffer");
  if (buffer->state == BufState::Free) {
    Violation(instruction, Str(buffer->owner, " is used after FreeTensor (or before AllocTensor)"));
  }
  if (buffer->state == BufState::Enqueued) {
    Violation(instruction, Str(buffer->owner, " is used while it is enqueued (DeQue it first)"));
  }
  if (aligned && byte_offset % kUbAlign != 0) {
    Violation(instruction, Str("UB operand at byte ", byte_offset, " is not 32-byte aligned"));
  }
  if (end > static_cast<uint64_t>(buffer->offset) + buffer->bytes) {
    Violation(instruction, Str("accesses bytes up to ", end - buffer->offset, " of ", buffer->owner, ", which has ",
                               buffer->bytes));
  }
}

void CheckGlobal(const char* instruction, bool sized, uint64_t size, uint64_t begin, uint64_t count,
                 const void* address, uint64_t bytes) {
  if (sized && begin + count > size) {
    Violation(instruction, Str("elements [", begin, ", ", begin + count, ") are outside the GlobalTensor's ", size,
                               " elements"));
  }
  if (count > 0) CheckGm(instruction, address, bytes);
}

void CheckSubTensor(uint32_t offset, uint32_t count) {
  if (offset > count) {
    Violation("LocalTensor::operator[]", Str("offset ", offset, " is past the tensor's ", count, " elements"));
  }
}

// ------------------------------------------------------------------ queues

void QueueState::Ready(const char* instruction) const {
  if (buffers_.empty()) Violation(instruction, "the queue has no buffers (InitBuffer first)");
}

Buffer* QueueState::Own(const char* instruction, const Buffer* b) const {
  for (auto* mine : buffers_) {
    if (mine == b) return mine;
  }
  Violation(instruction, "the tensor does not belong to this queue");
}

void QueueState::Attach(std::vector<Buffer*> buffers, uint32_t bytes) {
  if (!buffers_.empty()) Violation("InitBuffer", "the queue already has buffers");
  buffers_ = std::move(buffers);
  bytes_ = bytes;
}

Buffer* QueueState::Alloc() {
  Ready("AllocTensor");
  for (size_t k = 0; k < buffers_.size(); ++k) {
    Buffer* b = buffers_[(next_ + k) % buffers_.size()];
    if (b->state == BufState::Free) {
      next_ = (next_ + k + 1) % buffers_.size();
      b->state = BufState::Occupied;
      return b;
    }
  }
  Violation("AllocTensor", Str("all ", buffers_.size(), " buffers of the ", position_,
                               " queue are in use (the hardware would wait forever)"));
}

void QueueState::Enque(const Buffer* tile) {
  Ready("EnQue");
  Buffer* b = Own("EnQue", tile);
  if (b->state != BufState::Occupied && b->state != BufState::Dequeued) {
    Violation("EnQue", Str(b->owner, " is ", StateName(b->state), ", not allocated"));
  }
  if (queued_.size() >= static_cast<size_t>(depth_)) Violation("EnQue", Str("queue depth ", depth_, " exceeded"));
  b->state = BufState::Enqueued;
  queued_.push_back(b);
}

Buffer* QueueState::Deque() {
  Ready("DeQue");
  if (queued_.empty()) Violation("DeQue", "the queue is empty (nothing was EnQue'd)");
  Buffer* b = queued_.front();
  queued_.pop_front();
  b->state = BufState::Dequeued;
  return b;
}

void QueueState::Free(const Buffer* tile) {
  Ready("FreeTensor");
  Buffer* b = Own("FreeTensor", tile);
  if (b->state == BufState::Free) Violation("FreeTensor", Str(b->owner, " is already free"));
  b->state = BufState::Free;
}

// ------------------------------------------------------------------ instruction rules

void Fail(const char* instruction, const char* rule) { Violation(instruction, rule); }

void RejectBf16Arithmetic(const char* instruction) {
  Violation(instruction, "the vector unit of Atlas A2/A3 has no bfloat16 arithmetic; Cast to float first");
}

void RejectElementType(const char* instruction) {
  Violation(instruction, "the element type is not half or float (the only types the emulation implements)");
}

void RejectDuplicateType(const char* instruction) {
  Violation(instruction, "the element type is not one Duplicate supports (int16, uint16, half, bfloat16, int32, "
                         "uint32, float)");
}

void RequireGmElementAlignment(const char* instruction, const void* address, size_t element) {
  if (reinterpret_cast<uintptr_t>(address) % element != 0) {
    Violation(instruction, Str("global memory address is not aligned to sizeof(T) = ", element, " bytes"));
  }
}

void RequireCount(const char* instruction, int64_t count) {
  if (count < 0) Violation(instruction, Str("negative count ", count));
}

void RequireCopyBlocks(const char* instruction, uint64_t bytes) {
  if (bytes % 32 != 0) {
    Violation(instruction, Str("count * sizeof(T) = ", bytes,
                               " bytes is not a multiple of 32 (the hardware would round down and lose the "
                               "tail; use DataCopyPad)"));
  }
}

void RequireCompareRepeats(const char* instruction, uint64_t bytes) {
  if (bytes % 256 != 0) {
    Violation(instruction, Str("count * sizeof(T) = ", bytes,
                               " bytes is not a multiple of 256 (elements after the last full repeat would not "
                               "be compared)"));
  }
}

void RequireSelectScratch(const char* instruction) {
  const uint64_t limit = Ub::current().capacity() - platform().select_scratch;
  if (Ub::current().used() > limit) {
    Violation(instruction, Str("Select in tensor-scalar/tensor-tensor mode needs ", platform().select_scratch,
                               " bytes of UB scratch, but buffers use ", Ub::current().used(), " of ",
                               Ub::current().capacity()));
  }
}

void RequireNoPartialOverlap(const char* instruction, uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1,
                             bool same_size) {
  if (a0 < b1 && b0 < a1 && (a0 != b0 || !same_size)) {
    Violation(instruction, "destination and source overlap partially (only identical tiles may alias)");
  }
}

void CheckPadParams(const char* instruction, uint32_t block_count, uint32_t block_len, size_t element, uint32_t left,
                    uint32_t right, uint32_t rsv) {
  if (rsv != 0) Violation(instruction, "DataCopyExtParams::rsv is reserved and must be 0");
  if (block_count > 4095) Violation(instruction, "blockCount must be at most 4095");
  if (block_len > 2097151) Violation(instruction, "blockLen must be at most 2097151 bytes");
  if (block_len % element != 0) {
    Violation(instruction, Str("blockLen ", block_len, " is not a multiple of sizeof(T) = ", element));
  }
  if (left * element > 32 || right * element > 32) Violation(instruction, "paddings must be at most 32 bytes each");
}

bool CompareFloats(int mode, float a, float b) {
  switch (static_cast<AscendC::CMPMODE>(mode)) {
    case AscendC::CMPMODE::LT: return a < b;
    case AscendC::CMPMODE::GT: return a > b;
    case AscendC::CMPMODE::EQ: return a == b;
    case AscendC::CMPMODE::LE: return a <= b;
    case AscendC::CMPMODE::GE: return a >= b;
    case AscendC::CMPMODE::NE: return !(a == b);
  }
  return false;
}

Rounding ToRounding(int mode) {
  switch (static_cast<AscendC::RoundMode>(mode)) {
    case AscendC::RoundMode::CAST_FLOOR: return Rounding::Floor;
    case AscendC::RoundMode::CAST_CEIL: return Rounding::Ceil;
    case AscendC::RoundMode::CAST_ROUND: return Rounding::HalfAway;
    case AscendC::RoundMode::CAST_TRUNC: return Rounding::Trunc;
    case AscendC::RoundMode::CAST_ODD: return Rounding::Odd;
    default: return Rounding::NearestEven;
  }
}

// ------------------------------------------------------------------ aclnn support

std::string& recent_error() {
  static std::string message;
  return message;
}

void LogError(aclnnStatus, const char* format, ...) {
  char buffer[4096];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  recent_error() = buffer;
}

static double ReadElement(const aclTensor* t, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(t->data);
  switch (t->dtype) {
    case ACL_FLOAT: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case ACL_FLOAT16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return HalfFormat::Widen(b);
    }
    case ACL_BF16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return Bf16Format::Widen(b);
    }
    case ACL_DOUBLE: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    default:
      Violation("l0 op", "unsupported element type");
  }
}

static void WriteElement(aclTensor* t, int64_t i, double v) {
  auto* p = static_cast<uint8_t*>(t->data);
  switch (t->dtype) {
    case ACL_FLOAT: {
      const float f = static_cast<float>(v);
      std::memcpy(p + 4 * i, &f, 4);
      return;
    }
    case ACL_FLOAT16: {
      const uint16_t b = HalfFormat::Narrow(static_cast<float>(v), Rounding::NearestEven);
      std::memcpy(p + 2 * i, &b, 2);
      return;
    }
    case ACL_BF16: {
      const uint16_t b = Bf16Format::Narrow(static_cast<float>(v), Rounding::NearestEven);
      std::memcpy(p + 2 * i, &b, 2);
      return;
    }
    case ACL_DOUBLE:
      std::memcpy(p + 8 * i, &v, 8);
      return;
    default:
      Violation("l0 op", "unsupported element type");
  }
}

// Row-major strides of `dims`.
static std::vector<int64_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int64_t k = static_cast<int64_t>(dims.size()) - 2; k >= 0; --k) s[k] = s[k + 1] * dims[k + 1];
  return s;
}

// Advance a row-major multi-index over `dims`.
static void Next(std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  for (int64_t k = static_cast<int64_t>(dims.size()) - 1; k >= 0; --k) {
    if (++index[k] < dims[k]) return;
    index[k] = 0;
  }
}

// ------------------------------------------------------------------ kernel launches

struct KernelEntry {
  std::string name;
  std::function<void(GM_ADDR*)> run;
};

static std::map<std::string, KernelEntry>& kernel_registry() {
  static std::map<std::string, KernelEntry> r;
  return r;
}

void RegisterKernel(const std::string& op_type, const std::string& entry, std::function<void(GM_ADDR*)> run) {
  kernel_registry()[op_type] = KernelEntry{entry, std::move(run)};
}

// ------------------------------------------------------------------ cores and SyncAll

std::vector<CoreCost>& launch_costs() {
  static std::vector<CoreCost> c;
  return c;
}

CoreCost& core_cost() {
  static CoreCost outside;  // host code between launches
  auto& costs = launch_costs();
  const auto b = static_cast<size_t>(state().block_idx);
  return b < costs.size() ? costs[b] : outside;
}

namespace {

// The cores of a multi-core launch, each on its own thread, but only one running at a time
// (`running`): deterministic, and free of data races on the emulator's state.
struct Scheduler {
  std::mutex mu;
  std::condition_variable cv;
  int64_t running = -1;  // the core allowed to run; -1: the launcher
  std::vector<char> done, waiting;
};

Scheduler*& scheduler() {
  static Scheduler* s = nullptr;
  return s;
}

}  // namespace

void SyncAllCores() {
  core_cost().sync_alls += 1;
  Scheduler* s = scheduler();
  if (s == nullptr) return;  // a one-core launch has nobody to wait for
  const int64_t me = state().block_idx;
  std::unique_lock<std::mutex> lock(s->mu);
  s->waiting[me] = 1;
  s->running = -1;
  s->cv.notify_all();
  s->cv.wait(lock, [&] { return s->running == me; });
  s->waiting[me] = 0;
}

// Run every core of a launch: round after round, each core that has not returned runs in
// block order up to its next SyncAll (or its end). When the cores meet at a barrier, each
// waits (in the cost model) for the slowest one.
static void RunCores(uint32_t n, const std::function<void()>& run) {
  launch_costs().assign(n, CoreCost{});
  if (n == 1) {
    state().block_idx = 0;
    run();
    return;
  }
  Scheduler s;
  s.done.assign(n, 0);
  s.waiting.assign(n, 0);
  scheduler() = &s;
  std::vector<std::thread> threads;
  for (uint32_t b = 0; b < n; ++b) {
    threads.emplace_back([&s, &run, b] {
      {
        std::unique_lock<std::mutex> lock(s.mu);
        s.cv.wait(lock, [&] { return s.running == static_cast<int64_t>(b); });
      }
      run();
      std::lock_guard<std::mutex> lock(s.mu);
      s.done[b] = 1;
      s.running = -1;
      s.cv.notify_all();
    });
  }
  for (;;) {
    for (uint32_t b = 0; b < n; ++b) {
      std::unique_lock<std::mutex> lock(s.mu);
      if (s.done[b]) continue;
      state().block_idx = b;
      s.running = b;
      s.cv.notify_all();
      s.cv.wait(lock, [&] { return s.running == -1; });
    }
    std::lock_guard<std::mutex> lock(s.mu);
    const auto waiting = std::count(s.waiting.begin(), s.waiting.end(), 1);
    if (waiting == 0) break;
    if (waiting != static_cast<int64_t>(n)) {
      const auto returned = std::find(s.done.begin(), s.done.end(), 1) - s.done.begin();
      state().block_idx = returned;
      Violation("SyncAll", Str("block ", returned, " returned while other blocks wait at SyncAll: every "
                               "block of a launch must reach each SyncAll"));
    }
    uint64_t slowest = 0;
    for (const CoreCost& c : launch_costs()) slowest = std::max(slowest, c.Cycles());
    for (CoreCost& c : launch_costs()) c.sync_wait_cycles += slowest - c.Cycles();
  }
  for (auto& t : threads) t.join();
  scheduler() = nullptr;
}

static aclnnStatus LaunchAiCore(const std::string& op_type, const TensorList& inputs, const TensorList& outputs,
                                const AttrList& attrs) {
  auto def = ops::op_registry().find(op_type);
  auto kernel = kernel_registry().find(op_type);
  if (def == ops::op_registry().end() || kernel == kernel_registry().end()) {
    OP_LOGE(ACLNN_ERR_INNER_FIND_KERNEL_ERROR, "%s: no registered op or kernel", op_type.c_str());
    return ACLNN_ERR_INNER_FIND_KERNEL_ERROR;
  }
  std::vector<gert::StorageShape> in_shapes, out_shapes;
  std::vector<ge::DataType> in_types;
  for (const auto* t : inputs) {
    in_shapes.emplace_back(t->GetViewShape());
    in_types.push_back(static_cast<ge::DataType>(t->dtype));
  }
  for (const auto* t : outputs) out_shapes.emplace_back(t->GetViewShape());
  fe::PlatFormInfos platform_info;
  gert::TilingContext context(in_shapes, in_types, out_shapes, gert::RuntimeAttrs(attrs), &platform_info, op_type);
  if (def->second->aicore().tiling()(&context) != ge::GRAPH_SUCCESS) {
    OP_LOGE(ACLNN_ERR_INNER_TILING_ERROR, "%s: the tiling function failed", op_type.c_str());
    return ACLNN_ERR_INNER_TILING_ERROR;
  }
  const uint32_t block_dim = context.GetBlockDim();
  if (block_dim == 0) {
    OP_LOGE(ACLNN_ERR_INNER_TILING_ERROR, "%s: the tiling function set no block dim", op_type.c_str());
    return ACLNN_ERR_INNER_TILING_ERROR;
  }
  if (block_dim > platform().vector_cores) {
    // CANN's tilings launch at most one block per vector core (usedCores = min(coreNum, ...));
    // the kernels' core split assumes it.
    state().kernel = kernel->second.name;
    Violation("SetBlockDim", Str("block dim ", block_dim, " exceeds the ", platform().vector_cores,
                                 " vector cores of the SoC (GetCoreNumAiv)"));
  }
  const size_t tiling_size = context.GetRawTilingData()->GetDataSize();
  auto* tiling = static_cast<uint8_t*>(GmAlloc(tiling_size));
  std::memcpy(tiling, context.GetRawTilingData()->GetData(), tiling_size);
  launches().push_back(Launch{op_type, block_dim, std::vector<uint8_t>(tiling, tiling + tiling_size)});
  uint64_t workspace_bytes = 0;
  for (size_t w : context.workspace()) workspace_bytes += w;
  auto* workspace = static_cast<uint8_t*>(GmAlloc(workspace_bytes));
  std::vector<GM_ADDR> args;
  for (const auto* t : inputs) args.push_back(static_cast<GM_ADDR>(t->data));
  for (const auto* t : outputs) args.push_back(static_cast<GM_ADDR>(t->data));
  args.push_back(workspace);
  args.push_back(tiling);
  state().kernel = kernel->second.name;
  state().block_num = block_dim;
  RunCores(block_dim, [&] { kernel->second.run(args.data()); });
  launches().back().costs = launch_costs();
  launch_costs().clear();
  state() = RunState{};
  GmFree(workspace);
  GmFree(tiling);
  return ACLNN_SUCCESS;
}

aclnnStatus AddAiCoreLaunch(aclOpExecutor* executor, const std::string& op_type, TensorList inputs,
                            TensorList outputs, AttrList attrs) {
  executor->steps.push_back([=] { return LaunchAiCore(op_type, inputs, outputs, attrs); });
  return ACLNN_SUCCESS;
}

// ------------------------------------------------------------------ the case runner

namespace {

class Reader {
 public:
  explicit Reader(FILE* f) : f_(f) {}
  template <typename T>
  T Get() {
    T v;
    if (std::fread(&v, sizeof v, 1, f_) != 1) Fail();
    return v;
  }
  void Bytes(void* p, uint64_t n) {
    if (n > 0 && std::fread(p, 1, n, f_) != n) Fail();
  }

 private:
  [[noreturn]] static void Fail() {
    std::fprintf(stderr, "lossgrad ascendc runner: truncated case file\n");
    std::exit(2);
  }
  FILE* f_;
};

aclTensor* ReadTensor(Reader& r, bool with_data) {
  const auto dtype = static_cast<aclDataType>(r.Get<int32_t>());
  const uint32_t rank = r.Get<uint32_t>();
  std::vector<int64_t> dims(rank);
  for (auto& d : dims) d = r.Get<int64_t>();
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  const uint64_t bytes = static_cast<uint64_t>(n) * aclDataTypeSize(dtype);
  void* device = nullptr;
  aclrtMalloc(&device, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
  if (with_data) {
    if (r.Get<uint64_t>() != bytes) {
      std::fprintf(stderr, "lossgrad ascendc runner: tensor data size mismatch\n");
      std::exit(2);
    }
    r.Bytes(device, bytes);
  } else {
    std::memset(device, kUntouched, bytes);
  }
  return aclCreateTensor(dims.data(), rank, dtype, nullptr, 0, ACL_FORMAT_ND, dims.data(), rank, device);
}

void FreeTensor(aclTensor* t) {
  if (t == nullptr) return;
  aclrtFree(t->data);
  aclDestroyTensor(t);
}

}  // namespace

int RunCaseFile(int argc, char** argv, aclnnStatus (*call)(Case&)) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CASES RESULTS\n", argv[0]);
    return 2;
  }
  FILE* in = std::fopen(argv[1], "rb");
  FILE* out = std::fopen(argv[2], "wb");
  if (in == nullptr || out == nullptr) {
    std::fprintf(stderr, "lossgrad ascendc runner: cannot open the case or result file\n");
    return 2;
  }
  Reader r(in);
  char magic[8];
  r.Bytes(magic, 8);
  if (std::memcmp(magic, kCaseMagic, 8) != 0) {
    std::fprintf(stderr, "lossgrad ascendc runner: not a case file\n");
    return 2;
  }
  const uint32_t cases = r.Get<uint32_t>();
  for (uint32_t k = 0; k < cases; ++k) {
    Case c;
    c.signature = r.Get<uint32_t>();
    c.flags = r.Get<uint32_t>();
    c.input_count = r.Get<uint32_t>();
    if (c.input_count > kMaxInputs) {
      std::fprintf(stderr, "lossgrad ascendc runner: more inputs than the runner holds\n");
      return 2;
    }
    for (uint32_t i = 0; i < c.input_count; ++i) c.inputs[i] = ReadTensor(r, true);
    c.out = ReadTensor(r, false);
    c.attribute_count = r.Get<uint32_t>();
    if (c.attribute_count > kMaxAttributes) {
      std::fprintf(stderr, "lossgrad ascendc runner: more attributes than the runner holds\n");
      return 2;
    }
    for (uint32_t i = 0; i < c.attribute_count; ++i) {
      if (r.Get<uint8_t>() == 0) {
        c.attributes[i].i = r.Get<int64_t>();
      } else {
        c.attributes[i].f = r.Get<double>();
      }
    }
    platform().vector_cores = r.Get<uint32_t>();
    platform().ub_bytes = r.Get<uint64_t>();
    recent_error().clear();
    launches().clear();
    const aclnnStatus status = call(c);
    const std::string message = status == ACLNN_SUCCESS ? "" : aclGetRecentErrMsg();
    const auto length = static_cast<uint32_t>(message.size());
    const uint64_t bytes = static_cast<uint64_t>(c.out->Numel()) * aclDataTypeSize(c.out->dtype);
    std::fwrite(&status, sizeof status, 1, out);
    std::fwrite(&length, sizeof length, 1, out);
    std::fwrite(message.data(), 1, length, out);
    std::fwrite(&bytes, sizeof bytes, 1, out);
    std::fwrite(c.out->data, 1, bytes, out);
    const auto launch_count = static_cast<uint32_t>(launches().size());
    std::fwrite(&launch_count, sizeof launch_count, 1, out);
    for (const Launch& l : launches()) {
      const auto name_length = static_cast<uint32_t>(l.op_type.size());
      const auto tiling_length = static_cast<uint32_t>(l.tiling.size());
      std::fwrite(&name_length, sizeof name_length, 1, out);
      std::fwrite(l.op_type.data(), 1, name_length, out);
      std::fwrite(&l.block_dim, sizeof l.block_dim, 1, out);
      std::fwrite(&tiling_length, sizeof tiling_length, 1, out);
      std::fwrite(l.tiling.data(), 1, tiling_length, out);
      const auto cores = static_cast<uint32_t>(l.costs.size());
      std::fwrite(&cores, sizeof cores, 1, out);
      for (const CoreCost& c : l.costs) {
        const uint64_t fields[] = {c.gm_scalar, c.ub_scalar, c.copies, c.copy_bytes, c.gm_bytes,
                                   c.vector_instructions, c.vector_repeats, c.sync_alls,
                                   c.sync_wait_cycles, c.Cycles()};
        std::fwrite(fields, sizeof fields, 1, out);
      }
    }
    for (uint32_t i = 0; i < c.input_count; ++i) FreeTensor(c.inputs[i]);
    FreeTensor(c.out);
  }
  std::fclose(in);
  std::fclose(out);
  return 0;
}

}  // namespace lossgrad_emu

// ------------------------------------------------------------------ aclnn C API

const char* aclGetRecentErrMsg() { return lossgrad_emu::recent_error().c_str(); }

aclTensor* aclOpExecutor::AllocTensor(const op::Shape& shape, op::DataType type) {
  auto t = std::make_unique<aclTensor>();
  t->view = shape.dims();
  t->dtype = static_cast<aclDataType>(type);
  const uint64_t bytes = static_cast<uint64_t>(t->Numel()) * aclDataTypeSize(t->dtype);
  t->data = lossgrad_emu::GmAlloc(bytes);
  workspace += (bytes + 511) / 512 * 512;
  tensors.push_back(std::move(t));
  return tensors.back().get();
}

aclIntArray* aclOpExecutor::AllocIntArray(const int64_t* values, uint64_t n) {
  auto a = std::make_unique<aclIntArray>();
  a->values.assign(values, values + n);
  arrays.push_back(std::move(a));
  return arrays.back().get();
}

aclOpExecutor::~aclOpExecutor() {
  for (auto& t : tensors) lossgrad_emu::GmFree(t->data);
}

aclnnStatus CommonOpExecutorRun(void*, uint64_t, aclOpExecutor* executor, aclrtStream) {
  if (executor == nullptr) {
    OP_LOGE(ACLNN_ERR_PARAM_NULLPTR, "executor is null");
    return ACLNN_ERR_PARAM_NULLPTR;
  }
  aclnnStatus status = ACLNN_SUCCESS;
  for (auto& step : executor->steps) {
    status = step();
    if (status != ACLNN_SUCCESS) break;
  }
  delete executor;
  return status;
}

// ------------------------------------------------------------------ l0 ops

namespace l0op {

const aclTensor* BroadcastTo(const aclTensor* x, const aclIntArray* shape, aclOpExecutor* executor) {
  aclTensor* y = executor->AllocTensor(op::Shape(shape->values), x->GetDataType());
  executor->steps.push_back([x, y] {
    const auto& out = y->view;
    const auto& in = x->view;
    const size_t lead = out.size() - in.size();
    const auto in_strides = lossgrad_emu::Strides(in);
    const size_t width = aclDataTypeSize(x->dtype);
    std::vector<int64_t> index(out.size(), 0);
    for (int64_t i = 0; i < y->Numel(); ++i) {
      int64_t src = 0;
      for (size_t k = 0; k < in.size(); ++k) src += (in[k] == 1 ? 0 : index[lead + k]) * in_strides[k];
      std::memcpy(static_cast<uint8_t*>(y->data) + i * width, static_cast<const uint8_t*>(x->data) + src * width,
                  width);
      lossgrad_emu::Next(index, out);
    }
    return ACLNN_SUCCESS;
  });
  return y;
}

const aclTensor* ReduceSumOp(const aclTensor* x, const aclIntArray* axes, bool keep_dims, aclOpExecutor* executor) {
  std::vector<bool> reduced(x->view.size(), false);
  for (int64_t a : axes->values) reduced.at(a) = true;
  std::vector<int64_t> kept_dims(x->view.size()), out;
  for (size_t k = 0; k < x->view.size(); ++k) {
    kept_dims[k] = reduced[k] ? 1 : x->view[k];
    if (keep_dims || !reduced[k]) out.push_back(kept_dims[k]);
  }
  aclTensor* y = executor->AllocTensor(op::Shape(out), x->GetDataType());
  executor->steps.push_back([x, y, reduced, kept_dims] {
    const auto out_strides = lossgrad_emu::Strides(kept_dims);
    std::vector<float> acc(static_cast<size_t>(y->Numel()), 0.0f);
    std::vector<int64_t> index(x->view.size(), 0);
    for (int64_t i = 0; i < x->Numel(); ++i) {
      int64_t dst = 0;
      for (size_t k = 0; k < x->view.size(); ++k) dst += (reduced[k] ? 0 : index[k]) * out_strides[k];
      acc[dst] = acc[dst] + static_cast<float>(lossgrad_emu::ReadElement(x, i));
      lossgrad_emu::Next(index, x->view);
    }
    for (int64_t j = 0; j < y->Numel(); ++j) lossgrad_emu::WriteElement(y, j, acc[j]);
    return ACLNN_SUCCESS;
  });
  return y;
}

const aclTensor* Reshape(const aclTensor* x, const aclIntArray* shape, aclOpExecutor* executor) {
  aclTensor* y = executor->AllocTensor(op::Shape(shape->values), x->GetDataType());
  if (y->Numel() != x->Numel()) {
    OP_LOGE(ACLNN_ERR_INNER, "Reshape: element counts differ");
    return nullptr;
  }
  executor->steps.push_back([x, y] {
    std::memcpy(y->data, x->data, static_cast<size_t>(x->Numel()) * aclDataTypeSize(x->dtype));
    return ACLNN_SUCCESS;
  });
  return y;
}

const aclTensor* Cast(const aclTensor* x, op::DataType type, aclOpExecutor* executor) {
  aclTensor* y = executor->AllocTensor(x->GetViewShape(), type);
  executor->steps.push_back([x, y] {
    for (int64_t i = 0; i < x->Numel(); ++i) lossgrad_emu::WriteElement(y, i, lossgrad_emu::ReadElement(x, i));
    return ACLNN_SUCCESS;
  });
  return y;
}

const aclTensor* ZerosLike(const aclTensor* x, aclOpExecutor* executor) {
  aclTensor* y = executor->AllocTensor(x->GetViewShape(), x->GetDataType());
  executor->steps.push_back([y] {
    std::memset(y->data, 0, static_cast<size_t>(y->Numel()) * aclDataTypeSize(y->dtype));
    return ACLNN_SUCCESS;
  });
  return y;
}

const aclTensor* ViewCopy(const aclTensor* x, const aclTensor* y, aclOpExecutor* executor) {
  executor->steps.push_back([x, y] {
    if (x->Numel() != y->Numel() || x->dtype != y->dtype) {
      OP_LOGE(ACLNN_ERR_INNER, "ViewCopy: source and destination differ");
      return ACLNN_ERR_INNER;
    }
    std::memcpy(y->data, x->data, static_cast<size_t>(x->Numel()) * aclDataTypeSize(x->dtype));
    return ACLNN_SUCCESS;
  });
  return y;
}

}  // namespace l0op
