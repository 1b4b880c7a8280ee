// lossgrad_compiler Ascend C CPU emulation: stands in for CANN's opdev/op_executor.h.
#pragma once

#include "lossgrad_emu/opapi.h"
