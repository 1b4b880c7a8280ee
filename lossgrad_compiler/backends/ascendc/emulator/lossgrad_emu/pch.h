// lossgrad_compiler Ascend C CPU emulation: every header a runner translation unit needs,
// compiled once into a precompiled header (build.py) to keep per-signature builds short.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "kernel_operator.h"
#include "lossgrad_emu/opapi.h"
#include "lossgrad_emu/runner.h"
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
