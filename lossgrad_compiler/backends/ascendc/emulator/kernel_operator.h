// lossgrad_compiler Ascend C CPU emulation: the device API subset the generated kernels use.
//
// A stand-in for CANN's kernel_operator.h: the same names and signatures (AscendC
// namespace, TPipe/TQue/TBuf, LocalTensor/GlobalTensor, DataCopy/DataCopyPad, count-form
// vector instructions, Compare/Select/Cast), so a generated op_kernel source compiles with
// the host C++ compiler and runs once per block index. Written for lossgrad_compiler; the
// rules it checks, and their public sources, are listed in docs/ascend-c.md.
#pragma once

#include <cstdint>
#include <cstring>

#include "lossgrad_emu/core.h"
#include "lossgrad_emu/float16.h"
#include "lossgrad_emu/memory.h"
#include "lossgrad_emu/vector.h"

#define __aicore__
#define __global__
#define __gm__

using GM_ADDR = uint8_t*;

// The user's part of the workspace (the emulation's library part is empty:
// GetLibApiWorkSpaceSize() is 0).
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) { return workspace; }

namespace lossgrad_emu {
template <typename S>
void ReadTiling(S* out, const uint8_t* tiling) {
  CheckGm("GET_TILING_DATA", tiling, sizeof(S));
  std::memcpy(out, tiling, sizeof(S));
}
}  // namespace lossgrad_emu

#define REGISTER_TILING_DEFAULT(STRUCT) static_assert(sizeof(STRUCT) > 0, "tiling struct")
#define GET_TILING_DATA_WITH_STRUCT(STRUCT, VAR, TILING) \
  STRUCT VAR;                                            \
  lossgrad_emu::ReadTiling(&VAR, TILING)
