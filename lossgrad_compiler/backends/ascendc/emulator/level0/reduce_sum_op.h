// lossgrad_compiler Ascend C CPU emulation: stands in for CANN's level0/reduce_sum_op.h.
#pragma once

#include "lossgrad_emu/opapi.h"
