// lossgrad_compiler Ascend C CPU emulation: the case runner of `emulate()`.
//
// Reads a batch of calls from a file, makes device tensors for them, calls the signature's
// aclnn two-phase API through `call`, and writes each call's status, message and output.
// The output tensor starts filled with 0x5A bytes, so a rejected call's untouched output
// can be recognised. Each case names the SoC it runs on (vector cores, UB bytes).
#pragma once

#include <cstdint>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "lossgrad_emu/opapi.h"

namespace lossgrad_emu {

constexpr char kCaseMagic[8] = {'L', 'G', 'A', 'S', 'C', '0', '2', '\0'};
constexpr uint8_t kUntouched = 0x5A;

struct Case {
  uint32_t signature = 0;  // which of the runner's signatures to call
  uint32_t flags = 0;  // bit 0/1: null workspaceSize/executor; bit 2+k: input k null; bit 5: out null
  aclTensor* inputs[3] = {nullptr, nullptr, nullptr};
  aclTensor* out = nullptr;
  int64_t reduction = 0;
  bool log_target = false;
  double beta = 0.0;

  const aclTensor* input(int k) const { return (flags >> (2 + k)) & 1u ? nullptr : inputs[k]; }
  aclTensor* output() const { return (flags >> 5) & 1u ? nullptr : out; }
  uint64_t* workspace_size(uint64_t* p) const { return flags & 1u ? nullptr : p; }
  aclOpExecutor** executor(aclOpExecutor** p) const { return flags & 2u ? nullptr : p; }
};

// argv: <cases file> <results file>. Returns the process exit status.
int RunCaseFile(int argc, char** argv, aclnnStatus (*call)(Case&));

}  // namespace lossgrad_emu
