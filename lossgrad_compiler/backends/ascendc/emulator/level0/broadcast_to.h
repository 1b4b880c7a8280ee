// lossgrad_compiler Ascend C CPU emulation: stands in for CANN's level0/broadcast_to.h.
#pragma once

#include "lossgrad_emu/opapi.h"
