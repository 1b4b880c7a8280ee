// lossgrad_compiler Ascend C CPU emulation: stands in for CANN's level0/zero_op.h.
#pragma once

#include "lossgrad_emu/opapi.h"
