// lossgrad_compiler Ascend C CPU emulation: the 16-bit float types of the vector unit.
//
// `half` and `bfloat16_t` are stored as their IEEE bit patterns. Widening to float is exact;
// narrowing rounds with any of Cast's round modes (CAST_RINT = to nearest, ties to even).
// The rounding works in double, where every float and every rounding step is exact.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace lossgrad_emu {

enum class Rounding { NearestEven, Floor, Ceil, Trunc, HalfAway, Odd };

// A binary float format with EXP exponent bits and MANT stored mantissa bits.
template <int EXP, int MANT>
struct Format16 {
  static constexpr int kBias = (1 << (EXP - 1)) - 1;
  static constexpr int kMinExp = 1 - kBias;  // exponent of the smallest normal
  static constexpr uint16_t kInf = static_cast<uint16_t>(((1u << EXP) - 1) << MANT);
  static constexpr uint16_t kQuietNan = static_cast<uint16_t>(kInf | (1u << (MANT - 1)));
  static constexpr uint16_t kMaxFinite = static_cast<uint16_t>(kInf - 1);

  static float Widen(uint16_t bits) {
    const bool negative = (bits & 0x8000u) != 0;
    const int exponent = (bits >> MANT) & ((1 << EXP) - 1);
    const uint32_t mantissa = bits & ((1u << MANT) - 1);
    double value;
    if (exponent == (1 << EXP) - 1) {
      value = mantissa ? std::nan("") : INFINITY;
    } else if (exponent == 0) {
      value = std::ldexp(static_cast<double>(mantissa), kMinExp - MANT);
    } else {
      value = std::ldexp(static_cast<double>(mantissa | (1u << MANT)), exponent - kBias - MANT);
    }
    return static_cast<float>(negative ? -value : value);
  }

  static uint16_t Narrow(float f, Rounding mode) {
    const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
    if (std::isnan(f)) return static_cast<uint16_t>(sign | kQuietNan);
    if (std::isinf(f)) return static_cast<uint16_t>(sign | kInf);
    const double a = std::fabs(static_cast<double>(f));
    if (a == 0.0) return sign;
    int e2 = 0;
    std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
    const int exponent = e2 - 1 > kMinExp ? e2 - 1 : kMinExp;
    const double quantum = std::ldexp(1.0, exponent - MANT);
    const double steps = a / quantum;  // exact: a power-of-two scaling
    const double down = std::floor(steps);
    const double rest = steps - down;
    double n = down;
    switch (mode) {
      case Rounding::NearestEven:
        if (rest > 0.5 || (rest == 0.5 && std::fmod(down, 2.0) != 0.0)) n = down + 1;
        break;
      case Rounding::HalfAway:
        if (rest >= 0.5) n = down + 1;
        break;
      case Rounding::Trunc:
        break;
      case Rounding::Floor:
        if (rest > 0 && sign) n = down + 1;
        break;
      case Rounding::Ceil:
        if (rest > 0 && !sign) n = down + 1;
        break;
      case Rounding::Odd:
        if (rest > 0 && std::fmod(down, 2.0) == 0.0) n = down + 1;
        break;
    }
    const double rounded = n * quantum;
    const double max_finite = std::ldexp(static_cast<double>((2u << MANT) - 1), kBias - MANT);
    if (rounded > max_finite) {
      const bool toward_zero = mode == Rounding::Trunc || mode == Rounding::Odd ||
                               (mode == Rounding::Floor && !sign) ||
                               (mode == Rounding::Ceil && sign);
      return static_cast<uint16_t>(sign | (toward_zero ? kMaxFinite : kInf));
    }
    if (rounded < std::ldexp(1.0, kMinExp)) {  // subnormal (or the smallest normal exactly)
      return static_cast<uint16_t>(sign | static_cast<uint16_t>(rounded / quantum));
    }
    int e = 0;
    std::frexp(rounded, &e);
    const int biased = e - 1 + kBias;
    const double mantissa = rounded / std::ldexp(1.0, e - 1 - MANT) - std::ldexp(1.0, MANT);
    return static_cast<uint16_t>(sign | (biased << MANT) | static_cast<uint16_t>(mantissa));
  }
};

using HalfFormat = Format16<5, 10>;
using Bf16Format = Format16<8, 7>;

}  // namespace lossgrad_emu

// IEEE binary16, as Ascend C's `half`. Conversions from float round to nearest even.
struct half {
  uint16_t bits = 0;
  half() = default;
  half(float f) : bits(lossgrad_emu::HalfFormat::Narrow(f, lossgrad_emu::Rounding::NearestEven)) {}
  half(double d) : half(static_cast<float>(d)) {}
  operator float() const { return lossgrad_emu::HalfFormat::Widen(bits); }
  static half FromBits(uint16_t b) {
    half h;
    h.bits = b;
    return h;
  }
};

namespace AscendC {
// bfloat16: the upper half of a float. Ascend C forbids initialising it from an immediate;
// the kernels convert with ToFloat / ToBfloat16, as CANN's kernels do.
struct bfloat16_t {
  uint16_t bits = 0;
  static bfloat16_t FromBits(uint16_t b) {
    bfloat16_t v;
    v.bits = b;
    return v;
  }
};

inline float ToFloat(bfloat16_t v) { return lossgrad_emu::Bf16Format::Widen(v.bits); }
inline float ToFloat(half v) { return static_cast<float>(v); }
inline float ToFloat(float v) { return v; }
inline bfloat16_t ToBfloat16(float f) {
  return bfloat16_t::FromBits(lossgrad_emu::Bf16Format::Narrow(f, lossgrad_emu::Rounding::NearestEven));
}
}  // namespace AscendC

using AscendC::bfloat16_t;
