// lossgrad_compiler Ascend C CPU emulation: the aclnn L2 layer's toolbox.
//
// aclOpExecutor records the l0 steps phase 1 builds and runs them in phase 2. The l0 ops
// the generated wrappers use are emulated on the host with the semantics of CANN's ops
// (BroadcastTo, ReduceSum with keepdims, Reshape, Cast with round-to-nearest-even,
// ZerosLike, ViewCopy); ADD_TO_LAUNCHER_LIST_AICORE runs the registered op's tiling
// function and then its kernel once per block index, as the device would.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "lossgrad_emu/core.h"
#include "register/op_def_registry.h"

using GM_ADDR = uint8_t*;

struct aclIntArray {
  std::vector<int64_t> values;
};

namespace lossgrad_emu {
// The message OP_LOGE recorded last (aclGetRecentErrMsg returns it).
std::string& recent_error();
void LogError(aclnnStatus code, const char* format, ...);
}  // namespace lossgrad_emu

#define OP_LOGE(CODE, ...) lossgrad_emu::LogError(CODE, __VA_ARGS__)

struct aclOpExecutor {
  std::vector<std::function<aclnnStatus()>> steps;
  std::vector<std::unique_ptr<aclTensor>> tensors;
  std::vector<std::unique_ptr<aclIntArray>> arrays;
  uint64_t workspace = 0;

  // Intermediate tensors get device memory at once; workspace counts their bytes.
  aclTensor* AllocTensor(const op::Shape& shape, op::DataType type);
  aclIntArray* AllocIntArray(const int64_t* values, uint64_t n);
  uint64_t GetWorkspaceSize() const { return workspace; }
  ~aclOpExecutor();
};

class UniqueExecutor {
 public:
  explicit UniqueExecutor(aclOpExecutor* e) : executor_(e) {}
  ~UniqueExecutor() { delete executor_; }
  aclOpExecutor* get() const { return executor_; }
  void ReleaseTo(aclOpExecutor** out) {
    *out = executor_;
    executor_ = nullptr;
  }

 private:
  aclOpExecutor* executor_;
};

#define CREATE_EXECUTOR() UniqueExecutor(new aclOpExecutor())

// Phase 2: run the recorded steps, then release the executor.
aclnnStatus CommonOpExecutorRun(void* workspace, uint64_t size, aclOpExecutor* executor, aclrtStream stream);

namespace lossgrad_emu {

using TensorList = std::vector<const aclTensor*>;
using AttrList = std::vector<gert::AttrValue>;

// The kernel entry of an OpType: called with (inputs..., outputs..., workspace, tiling).
void RegisterKernel(const std::string& op_type, const std::string& entry, std::function<void(GM_ADDR*)> run);

// Records the launch: tiling function, then the kernel on every block index.
aclnnStatus AddAiCoreLaunch(aclOpExecutor* executor, const std::string& op_type, TensorList inputs,
                            TensorList outputs, AttrList attrs);

}  // namespace lossgrad_emu

#define OP_INPUT(...) lossgrad_emu::TensorList{__VA_ARGS__}
#define OP_OUTPUT(...) lossgrad_emu::TensorList{__VA_ARGS__}
#define OP_ATTR(...) lossgrad_emu::AttrList{__VA_ARGS__}
#define ADD_TO_LAUNCHER_LIST_AICORE(OPTYPE, ...) \
  lossgrad_emu::AddAiCoreLaunch(executor, #OPTYPE, __VA_ARGS__)

// The l0 ops the wrappers use, with the semantics of CANN's: BroadcastTo (numpy rules),
// ReduceSum (keepdims; the sum runs in the tensor's type, in row-major order of the source,
// so it is deterministic), Reshape, Cast (round to nearest even), ZerosLike, ViewCopy.
namespace l0op {
inline const aclTensor* Contiguous(const aclTensor* x, aclOpExecutor*) { return x; }
const aclTensor* BroadcastTo(const aclTensor* x, const aclIntArray* shape, aclOpExecutor* executor);
const aclTensor* ReduceSumOp(const aclTensor* x, const aclIntArray* axes, bool keep_dims, aclOpExecutor* executor);
const aclTensor* Reshape(const aclTensor* x, const aclIntArray* shape, aclOpExecutor* executor);
const aclTensor* Cast(const aclTensor* x, op::DataType type, aclOpExecutor* executor);
const aclTensor* ZerosLike(const aclTensor* x, aclOpExecutor* executor);
const aclTensor* ViewCopy(const aclTensor* x, const aclTensor* y, aclOpExecutor* executor);
}  // namespace l0op
