// lossgrad_compiler Ascend C CPU emulation: the case runner of `emulate()`.
//
// Reads a batch of calls from a file, makes device tensors for them, calls the signature's
// aclnn two-phase API through `call`, and writes each call's status, message, output and
// AI-core launches (OpType, block dim and tiling data of each, core.h's Launch).
// The output tensor starts filled with 0x5A bytes, so a rejected call's untouched output
// can be recognised. Each case names the SoC it runs on (vector cores, UB bytes).
#pragma once

#include <cstdint>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "lossgrad_emu/opapi.h"

namespace lossgrad_emu {

constexpr char kCaseMagic[8] = {'L', 'G', 'A', 'S', 'C', '0', '5', '\0'};
constexpr uint8_t kUntouched = 0x5A;
constexpr uint32_t kMaxInputs = 8;  // tensors a case may pass (the operator's inputs)
constexpr uint32_t kMaxAttributes = 8;  // attribute values a case may pass

// One attribute argument of the aclnn call, in the operator's attribute order (spec.py):
// an integer (a reduction's aclnn code, a flag) or a double.
union AttributeValue {
  int64_t i;
  double f;
};

struct Case {
  uint32_t signature = 0;  // which of the runner's signatures to call
  // bit 0/1: null workspaceSize/executor; bit 2+k: input k null; bit 2+kMaxInputs: out null
  uint32_t flags = 0;
  uint32_t input_count = 0;
  aclTensor* inputs[kMaxInputs] = {};
  aclTensor* out = nullptr;
  uint32_t attribute_count = 0;
  AttributeValue attributes[kMaxAttributes] = {};

  const aclTensor* input(uint32_t k) const { return (flags >> (2 + k)) & 1u ? nullptr : inputs[k]; }
  aclTensor* output() const { return (flags >> (2 + kMaxInputs)) & 1u ? nullptr : out; }
  int64_t int_attribute(uint32_t k) const { return attributes[k].i; }
  double float_attribute(uint32_t k) const { return attributes[k].f; }
  uint64_t* workspace_size(uint64_t* p) const { return flags & 1u ? nullptr : p; }
  aclOpExecutor** executor(aclOpExecutor** p) const { return flags & 2u ? nullptr : p; }
};

// argv: <cases file> <results file>. Returns the process exit status.
int RunCaseFile(int argc, char** argv, aclnnStatus (*call)(Case&));

}  // namespace lossgrad_emu
