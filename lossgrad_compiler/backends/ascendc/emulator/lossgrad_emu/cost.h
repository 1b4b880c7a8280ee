// lossgrad_compiler Ascend C CPU emulation: the cost model.
//
// A simple, documented model for comparing kernel designs in the emulator, not a cycle-
// accurate simulator. Each core counts what it does; a core's cycles are the counts times
// the weights below, plus the cycles it waits at each SyncAll for the slowest core. A
// launch takes as long as its slowest core (the critical path).
//
// What is counted, per core:
//  * gm_scalar: GlobalTensor::GetValue/SetValue (a scalar access to GM through the scalar
//    unit's data cache; its latency dominates scalar code, so a gather over N targets
//    costs N of these);
//  * ub_scalar: LocalTensor::GetValue/SetValue (a scalar access to UB);
//  * copies and gm_bytes: DataCopy/DataCopyPad between GM and UB (MTE2/MTE3), and every
//    byte moved to or from GM, scalar accesses included;
//  * vector_instructions and vector_repeats: every vector instruction (Add ... Cast,
//    Duplicate, Compare, Select), and its 256-byte repeats;
//  * sync_alls and sync_wait_cycles: each SyncAll, and the cycles spent waiting in it.
// Scalar arithmetic in registers is not visible to the emulator and is not counted; it
// is the same in any two designs that run the same body.
#pragma once

#include <cstdint>
#include <vector>

namespace lossgrad_emu {

// The cycle weights, in one place (orders of magnitude for an Atlas A2 vector core).
constexpr uint64_t kGmScalarCycles = 100;      // one scalar GM access (a cache miss)
constexpr uint64_t kUbScalarCycles = 2;        // one scalar UB access
constexpr uint64_t kCopyStartCycles = 200;     // one DataCopy(Pad): issue and GM latency
constexpr uint64_t kCopyBytesPerCycle = 64;    // MTE bandwidth of one core
constexpr uint64_t kVectorIssueCycles = 8;     // one vector instruction
constexpr uint64_t kVectorRepeatCycles = 1;    // one 256-byte repeat
constexpr uint64_t kVectorRepeatBytes = 256;
constexpr uint64_t kSyncAllCycles = 2000;      // one SyncAll barrier through GM, uncontended

struct CoreCost {
  uint64_t gm_scalar = 0;
  uint64_t ub_scalar = 0;
  uint64_t copies = 0;
  uint64_t copy_bytes = 0;  // GM bytes moved by DataCopy(Pad)
  uint64_t gm_bytes = 0;    // all GM bytes moved (copies and scalar accesses)
  uint64_t vector_instructions = 0;
  uint64_t vector_repeats = 0;
  uint64_t sync_alls = 0;
  uint64_t sync_wait_cycles = 0;

  // The core's cycles under the weights above.
  uint64_t Cycles() const {
    return gm_scalar * kGmScalarCycles + ub_scalar * kUbScalarCycles + copies * kCopyStartCycles +
           (copy_bytes + kCopyBytesPerCycle - 1) / kCopyBytesPerCycle + vector_instructions * kVectorIssueCycles +
           vector_repeats * kVectorRepeatCycles + sync_alls * kSyncAllCycles + sync_wait_cycles;
  }
};

// The counters of the launch being run, one per core (runtime.cpp sizes it per launch).
std::vector<CoreCost>& launch_costs();
CoreCost& core_cost();  // the running core's

inline void CountGmScalar(uint64_t bytes) {
  CoreCost& c = core_cost();
  c.gm_scalar += 1;
  c.gm_bytes += bytes;
}
inline void CountUbScalar() { core_cost().ub_scalar += 1; }
inline void CountCopy(uint64_t bytes) {
  CoreCost& c = core_cost();
  c.copies += 1;
  c.copy_bytes += bytes;
  c.gm_bytes += bytes;
}
inline void CountVector(uint64_t bytes) {
  CoreCost& c = core_cost();
  c.vector_instructions += 1;
  c.vector_repeats += (bytes + kVectorRepeatBytes - 1) / kVectorRepeatBytes;
}

}  // namespace lossgrad_emu
