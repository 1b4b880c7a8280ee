// lossgrad_compiler Ascend C CPU emulation: stands in for CANN's aclnn_kernels/cast.h.
#pragma once

#include "lossgrad_emu/opapi.h"
