// lossgrad_compiler Ascend C CPU emulation: shared state and the rule checker.
//
// The emulation runs a kernel once per block index, on one host thread. Everything a kernel
// may only do in a certain way on the hardware is checked; a violation prints one line,
//   lossgrad ascendc emulator: kernel <name>, block <i>: <instruction>: <rule>
// and ends the process with exit status 86 (the Python side turns it into an error).
// Functions declared here and in the other lossgrad_emu headers without a body are
// defined in runtime.cpp, which is compiled once and linked into every runner.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "lossgrad_emu/cost.h"

namespace lossgrad_emu {

constexpr int kViolationExit = 86;

struct Platform {
  uint64_t ub_bytes = 196608;  // Atlas A2/A3
  uint32_t vector_cores = 48;
  uint32_t select_scratch = 8192;  // UB kept by Select in modes 1 and 2
};

struct RunState {
  std::string kernel = "(host)";
  int64_t block_idx = 0;
  int64_t block_num = 1;
};

// One AI-core launch of a call: what the op_host tiling function chose for it. The case
// runner writes the launches of each call beside its output (runner.h).
struct Launch {
  std::string op_type;
  uint32_t block_dim = 0;
  std::vector<uint8_t> tiling;  // the tiling data, as the kernel receives it
  std::vector<CoreCost> costs;  // per core, the cost model's counters (cost.h)
};

Platform& platform();
RunState& state();
std::vector<Launch>& launches();  // of the call being run

// SyncAll: wait until every core of the launch has reached this barrier (runtime.cpp runs
// the cores of a launch in turn, each up to its next SyncAll, so that the barrier holds).
void SyncAllCores();

// Report a broken rule and end the process (exit status kViolationExit).
[[noreturn]] void Violation(const std::string& instruction, const std::string& rule);

template <typename... Parts>
std::string Str(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// Device memory: every allocation (aclrtMalloc, tiling data, workspace) is registered, and
// kernels may touch only registered bytes.
void* GmAlloc(uint64_t bytes);
void GmFree(void* p);
// [address, address + bytes) must lie inside one allocation.
void CheckGm(const std::string& instruction, const void* address, uint64_t bytes);

}  // namespace lossgrad_emu
