// lossgrad_compiler Ascend C CPU emulation: stands in for CANN's aclnn_kernels/contiguous.h.
#pragma once

#include "lossgrad_emu/opapi.h"
