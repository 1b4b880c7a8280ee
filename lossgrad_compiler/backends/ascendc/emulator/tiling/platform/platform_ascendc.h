// lossgrad_compiler Ascend C CPU emulation: the platform queries of a tiling function.
#pragma once

#include <cstdint>

#include "lossgrad_emu/core.h"

namespace fe {
// The SoC the emulated launch runs on (UB size and vector cores from lossgrad_emu::platform()).
class PlatFormInfos {};
}  // namespace fe

namespace platform_ascendc {

enum class CoreMemType { L0_A = 0, L0_B = 1, L0_C = 2, L1 = 3, L2 = 4, UB = 5, HBM = 6 };

class PlatformAscendC {
 public:
  explicit PlatformAscendC(fe::PlatFormInfos*) {}
  uint32_t GetCoreNum() const { return lossgrad_emu::platform().vector_cores; }
  uint32_t GetCoreNumAiv() const { return lossgrad_emu::platform().vector_cores; }
  uint32_t GetCoreNumAic() const { return lossgrad_emu::platform().vector_cores / 2; }
  void GetCoreMemSize(CoreMemType type, uint64_t& size) const {
    size = type == CoreMemType::UB ? lossgrad_emu::platform().ub_bytes : 0;
  }
  uint32_t GetLibApiWorkSpaceSize() const { return 0; }
};

}  // namespace platform_ascendc
