// lossgrad_compiler Ascend C CPU emulation: data movement and vector instructions.
//
// Count-form API of Atlas A2/A3. Each instruction checks its operands (32-byte aligned UB
// addresses, inside their buffers, buffers in a usable state, no partial overlap of
// destination and source), the element types the vector unit supports (no bf16
// arithmetic), DataCopy's 32-byte count rule and sizeof(T)-aligned GM addresses,
// DataCopyPad's parameter ranges, Compare's 256-byte count rule, Cast's allowed
// (type, round mode) pairs and the Select scratch. Arithmetic is IEEE: float directly,
// half computed in float and rounded to nearest even. The rules and their public sources
// are listed in docs/ascend-c.md.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "lossgrad_emu/memory.h"

namespace AscendC {

enum class CMPMODE : uint8_t { LT = 0, GT = 1, EQ = 2, LE = 3, GE = 4, NE = 5 };
enum class SELMODE : uint8_t { VSEL_CMPMASK_SPR = 0, VSEL_TENSOR_SCALAR_MODE = 1, VSEL_TENSOR_TENSOR_MODE = 2 };
enum class RoundMode : uint8_t {
  CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD
};

struct DataCopyExtParams {
  uint16_t blockCount = 1;
  uint32_t blockLen = 0;   // bytes
  uint32_t srcStride = 0;  // GM side in bytes, UB side in 32-byte blocks
  uint32_t dstStride = 0;
  uint32_t rsv = 0;
  DataCopyExtParams() = default;
  DataCopyExtParams(uint16_t count, uint32_t len, uint32_t src_stride, uint32_t dst_stride, uint32_t r)
      : blockCount(count), blockLen(len), srcStride(src_stride), dstStride(dst_stride), rsv(r) {}
};

template <typename T>
struct DataCopyPadExtParams {
  bool isPad = false;
  uint8_t leftPadding = 0;
  uint8_t rightPadding = 0;
  T paddingValue{};
  DataCopyPadExtParams() = default;
  DataCopyPadExtParams(bool pad, uint8_t left, uint8_t right, T value)
      : isPad(pad), leftPadding(left), rightPadding(right), paddingValue(value) {}
};

}  // namespace AscendC

namespace lossgrad_emu {

using AscendC::LocalTensor;

template <typename T>
constexpr bool kIsBf16 = std::is_same_v<T, AscendC::bfloat16_t>;
template <typename T>
constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, half>;

template <typename T>
float Load(const T& v) {
  if constexpr (kIsBf16<T>) return AscendC::ToFloat(v);
  else return static_cast<float>(v);
}

template <typename T>
T Store(float f) {
  if constexpr (kIsBf16<T>) return AscendC::ToBfloat16(f);
  else return static_cast<T>(f);
}

// Out-of-line checks (runtime.cpp).
void RejectBf16Arithmetic(const char* instruction);
void RejectElementType(const char* instruction);
void RequireCount(const char* instruction, int64_t count);
void RequireCopyBlocks(const char* instruction, uint64_t bytes);
void RequireGmElementAlignment(const char* instruction, const void* address, size_t element);
void RejectDuplicateType(const char* instruction);
void RequireCompareRepeats(const char* instruction, uint64_t bytes);
void RequireSelectScratch(const char* instruction);
void RequireNoPartialOverlap(const char* instruction, uint64_t dst_begin, uint64_t dst_end, uint64_t src_begin,
                             uint64_t src_end, bool same_size);
void CheckPadParams(const char* instruction, uint32_t block_count, uint32_t block_len, size_t element,
                    uint32_t left, uint32_t right, uint32_t rsv);
void Fail(const char* instruction, const char* rule);
bool CompareFloats(int mode, float a, float b);
Rounding ToRounding(int mode);

// half and float: the vector unit's float arithmetic on A2/A3.
template <typename T>
void RequireFloatArithmetic(const char* instruction) {
  if constexpr (kIsBf16<T>) RejectBf16Arithmetic(instruction);
  else if constexpr (!kIsFloat<T>) RejectElementType(instruction);
}

// Duplicate's element types on A2/A3: the 16- and 32-bit ones, bfloat16 included.
template <typename T>
void RequireDuplicateType(const char* instruction) {
  constexpr bool ok = std::is_same_v<T, int16_t> || std::is_same_v<T, uint16_t> || std::is_same_v<T, half> ||
                      kIsBf16<T> || std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t> ||
                      std::is_same_v<T, float>;
  if constexpr (!ok) RejectDuplicateType(instruction);
}

template <typename T, typename U>
void NoPartialOverlap(const char* instruction, const LocalTensor<T>& dst, uint64_t dst_count,
                      const LocalTensor<U>& src, uint64_t src_count) {
  RequireNoPartialOverlap(instruction, dst.byte_offset(), dst.byte_offset() + dst_count * sizeof(T),
                          src.byte_offset(), src.byte_offset() + src_count * sizeof(U), sizeof(T) == sizeof(U));
}

template <typename T, typename F>
void Elementwise(const char* instruction, const LocalTensor<T>& dst, int64_t count, F f) {
  RequireCount(instruction, count);
  RequireFloatArithmetic<T>(instruction);
  if (count == 0) return;
  T* d = dst.Data(instruction, count);
  for (int64_t i = 0; i < count; ++i) d[i] = Store<T>(f(i));
  CountVector(static_cast<uint64_t>(count) * sizeof(T));
}

}  // namespace lossgrad_emu

namespace AscendC {

// ------------------------------------------------------------------ data movement

template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint32_t count) {
  const uint64_t bytes = static_cast<uint64_t>(count) * sizeof(T);
  lossgrad_emu::RequireCopyBlocks("DataCopy (GM to UB)", bytes);
  if (count == 0) return;
  const T* from = src.Data("DataCopy (GM to UB)", 0, count);
  lossgrad_emu::RequireGmElementAlignment("DataCopy (GM to UB)", from, sizeof(T));
  std::memcpy(dst.Data("DataCopy (GM to UB)", count), from, bytes);
  lossgrad_emu::CountCopy(bytes);
}

template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count) {
  const uint64_t bytes = static_cast<uint64_t>(count) * sizeof(T);
  lossgrad_emu::RequireCopyBlocks("DataCopy (UB to GM)", bytes);
  if (count == 0) return;
  T* to = dst.Data("DataCopy (UB to GM)", 0, count);
  lossgrad_emu::RequireGmElementAlignment("DataCopy (UB to GM)", to, sizeof(T));
  std::memcpy(to, src.Data("DataCopy (UB to GM)", count), bytes);
  lossgrad_emu::CountCopy(bytes);
}

template <typename T>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count) {
  const uint64_t bytes = static_cast<uint64_t>(count) * sizeof(T);
  lossgrad_emu::RequireCopyBlocks("DataCopy (UB to UB)", bytes);
  if (count == 0) return;
  lossgrad_emu::NoPartialOverlap("DataCopy (UB to UB)", dst, count, src, count);
  std::memmove(dst.Data("DataCopy (UB to UB)", count), src.Data("DataCopy (UB to UB)", count), bytes);
  lossgrad_emu::CountVector(bytes);
}

template <typename T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& p,
                 const DataCopyPadExtParams<T>& pad) {
  const char* name = "DataCopyPad (GM to UB)";
  lossgrad_emu::CheckPadParams(name, p.blockCount, p.blockLen, sizeof(T), pad.leftPadding, pad.rightPadding,
                               p.rsv);
  if (p.blockCount == 0 || p.blockLen == 0) return;
  const uint32_t n = p.blockLen / sizeof(T);
  const uint32_t padded = ((pad.leftPadding + n + pad.rightPadding) * sizeof(T) + 31) / 32 * 32;
  const uint32_t padded_elems = padded / sizeof(T);
  for (uint32_t b = 0; b < p.blockCount; ++b) {
    const uint64_t gm_elem = static_cast<uint64_t>(b) * (p.blockLen + p.srcStride) / sizeof(T);
    const uint32_t ub_elem = b * (padded + p.dstStride * 32) / sizeof(T);
    const T* s = src.Data(name, gm_elem, n);
    T* d = dst[ub_elem].Data(name, padded_elems);
    const T fill = pad.isPad ? pad.paddingValue : s[0];  // dummy fill: the block's first element
    for (uint32_t i = 0; i < padded_elems; ++i) d[i] = fill;
    std::memcpy(d + pad.leftPadding, s, p.blockLen);
  }
  lossgrad_emu::CountCopy(static_cast<uint64_t>(p.blockCount) * p.blockLen);
}

template <typename T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p) {
  const char* name = "DataCopyPad (UB to GM)";
  lossgrad_emu::CheckPadParams(name, p.blockCount, p.blockLen, sizeof(T), 0, 0, p.rsv);
  if (p.blockCount == 0 || p.blockLen == 0) return;
  const uint32_t n = p.blockLen / sizeof(T);
  const uint32_t padded = (p.blockLen + 31) / 32 * 32;
  for (uint32_t b = 0; b < p.blockCount; ++b) {
    const uint64_t gm_elem = static_cast<uint64_t>(b) * (p.blockLen + p.dstStride) / sizeof(T);
    const uint32_t ub_elem = b * (padded + p.srcStride * 32) / sizeof(T);
    std::memcpy(dst.Data(name, gm_elem, n), src[ub_elem].Data(name, n), p.blockLen);
  }
  lossgrad_emu::CountCopy(static_cast<uint64_t>(p.blockCount) * p.blockLen);
}

// ------------------------------------------------------------------ arithmetic

#define LOSSGRAD_EMU_BINARY(NAME, EXPR)                                                        \
  template <typename T>                                                                        \
  void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, \
            const int32_t& count) {                                                            \
    lossgrad_emu::RequireCount(#NAME, count);                                                  \
    if (count == 0) return;                                                                    \
    lossgrad_emu::NoPartialOverlap(#NAME, dst, count, src0, count);                            \
    lossgrad_emu::NoPartialOverlap(#NAME, dst, count, src1, count);                            \
    const T* a = src0.Data(#NAME, count);                                                      \
    const T* b = src1.Data(#NAME, count);                                                      \
    lossgrad_emu::Elementwise(#NAME, dst, count, [&](int64_t i) {                              \
      const float x = lossgrad_emu::Load(a[i]);                                                \
      const float y = lossgrad_emu::Load(b[i]);                                                \
      return static_cast<float>(EXPR);                                                         \
    });                                                                                        \
  }

LOSSGRAD_EMU_BINARY(Add, x + y)
LOSSGRAD_EMU_BINARY(Sub, x - y)
LOSSGRAD_EMU_BINARY(Mul, x * y)
LOSSGRAD_EMU_BINARY(Div, x / y)
LOSSGRAD_EMU_BINARY(Max, std::fmax(x, y))
LOSSGRAD_EMU_BINARY(Min, std::fmin(x, y))
#undef LOSSGRAD_EMU_BINARY

#define LOSSGRAD_EMU_SCALAR(NAME, EXPR)                                                           \
  template <typename T>                                                                           \
  void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalar,                \
            const int32_t& count) {                                                               \
    lossgrad_emu::RequireCount(#NAME, count);                                                     \
    if (count == 0) return;                                                                       \
    lossgrad_emu::NoPartialOverlap(#NAME, dst, count, src, count);                                \
    const T* a = src.Data(#NAME, count);                                                          \
    const float y = lossgrad_emu::Load(scalar);                                                   \
    lossgrad_emu::Elementwise(#NAME, dst, count, [&](int64_t i) {                                 \
      const float x = lossgrad_emu::Load(a[i]);                                                   \
      return static_cast<float>(EXPR);                                                            \
    });                                                                                           \
  }

LOSSGRAD_EMU_SCALAR(Adds, x + y)
LOSSGRAD_EMU_SCALAR(Muls, x * y)
LOSSGRAD_EMU_SCALAR(Maxs, std::fmax(x, y))
LOSSGRAD_EMU_SCALAR(Mins, std::fmin(x, y))
#undef LOSSGRAD_EMU_SCALAR

#define LOSSGRAD_EMU_UNARY(NAME, EXPR)                                                       \
  template <typename T>                                                                      \
  void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count) {    \
    lossgrad_emu::RequireCount(#NAME, count);                                                \
    if (count == 0) return;                                                                  \
    lossgrad_emu::NoPartialOverlap(#NAME, dst, count, src, count);                           \
    const T* a = src.Data(#NAME, count);                                                     \
    lossgrad_emu::Elementwise(#NAME, dst, count, [&](int64_t i) {                            \
      const float x = lossgrad_emu::Load(a[i]);                                              \
      return static_cast<float>(EXPR);                                                       \
    });                                                                                      \
  }

LOSSGRAD_EMU_UNARY(Exp, std::exp(x))
LOSSGRAD_EMU_UNARY(Ln, std::log(x))
LOSSGRAD_EMU_UNARY(Abs, std::fabs(x))
#undef LOSSGRAD_EMU_UNARY

template <typename T>
void Duplicate(const LocalTensor<T>& dst, const T& scalar, const int32_t& count) {
  lossgrad_emu::RequireCount("Duplicate", count);
  lossgrad_emu::RequireDuplicateType<T>("Duplicate");
  if (count == 0) return;
  T* d = dst.Data("Duplicate", count);
  for (int32_t i = 0; i < count; ++i) d[i] = scalar;
  lossgrad_emu::CountVector(static_cast<uint64_t>(count) * sizeof(T));
}

// ------------------------------------------------------------------ compare and select

template <typename U, typename T>
void CompareCommon(const char* name, const LocalTensor<U>& dst, const LocalTensor<T>& src0, uint32_t count) {
  static_assert(std::is_unsigned_v<U>, "the mask of Compare is an unsigned integer tensor");
  lossgrad_emu::RequireFloatArithmetic<T>(name);
  lossgrad_emu::RequireCompareRepeats(name, static_cast<uint64_t>(count) * sizeof(T));
  (void)src0;
  (void)dst.Data(name, count / 8 / sizeof(U));
  if (count > 0) lossgrad_emu::CountVector(static_cast<uint64_t>(count) * sizeof(T));
}

template <typename U, typename T>
void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,
             CMPMODE mode, uint32_t count) {
  CompareCommon("Compare", dst, src0, count);
  if (count == 0) return;
  const T* a = src0.Data("Compare", count);
  const T* b = src1.Data("Compare", count);
  auto* bits = reinterpret_cast<uint8_t*>(dst.Data("Compare", count / 8 / sizeof(U)));
  for (uint32_t i = 0; i < count / 8; ++i) bits[i] = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (lossgrad_emu::CompareFloats(static_cast<int>(mode), lossgrad_emu::Load(a[i]), lossgrad_emu::Load(b[i]))) {
      bits[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
    }
  }
}

template <typename U, typename T>
void Compares(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const T src1, CMPMODE mode,
              uint32_t count) {
  CompareCommon("Compares", dst, src0, count);
  if (count == 0) return;
  const T* a = src0.Data("Compares", count);
  const float b = lossgrad_emu::Load(src1);
  auto* bits = reinterpret_cast<uint8_t*>(dst.Data("Compares", count / 8 / sizeof(U)));
  for (uint32_t i = 0; i < count / 8; ++i) bits[i] = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (lossgrad_emu::CompareFloats(static_cast<int>(mode), lossgrad_emu::Load(a[i]), b)) {
      bits[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
    }
  }
}

template <typename U, typename T>
void CompareScalar(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const T src1, CMPMODE mode,
                   uint32_t count) {
  Compares(dst, src0, src1, mode, count);
}

template <typename T, typename U>
void Select(const LocalTensor<T>& dst, const LocalTensor<U>& mask, const LocalTensor<T>& src0,
            const LocalTensor<T>& src1, SELMODE mode, uint32_t count) {
  static_assert(std::is_unsigned_v<U>, "the mask of Select is an unsigned integer tensor");
  if (mode != SELMODE::VSEL_TENSOR_TENSOR_MODE) {
    lossgrad_emu::Fail("Select", "the tensor-tensor form needs VSEL_TENSOR_TENSOR_MODE");
  }
  lossgrad_emu::RequireFloatArithmetic<T>("Select");
  lossgrad_emu::RequireSelectScratch("Select");
  if (count == 0) return;
  lossgrad_emu::NoPartialOverlap("Select", dst, count, src0, count);
  lossgrad_emu::NoPartialOverlap("Select", dst, count, src1, count);
  const T* a = src0.Data("Select", count);
  const T* b = src1.Data("Select", count);
  const auto* bits = reinterpret_cast<const uint8_t*>(mask.Data("Select", (count + 8 * sizeof(U) - 1) / (8 * sizeof(U))));
  T* d = dst.Data("Select", count);
  for (uint32_t i = 0; i < count; ++i) d[i] = (bits[i / 8] >> (i % 8)) & 1u ? a[i] : b[i];
  lossgrad_emu::CountVector(static_cast<uint64_t>(count) * sizeof(T));
}

template <typename T, typename U>
void Select(const LocalTensor<T>& dst, const LocalTensor<U>& mask, const LocalTensor<T>& src0, T src1,
            SELMODE mode, uint32_t count) {
  static_assert(std::is_unsigned_v<U>, "the mask of Select is an unsigned integer tensor");
  if (mode != SELMODE::VSEL_TENSOR_SCALAR_MODE) {
    lossgrad_emu::Fail("Select", "the tensor-scalar form needs VSEL_TENSOR_SCALAR_MODE");
  }
  lossgrad_emu::RequireFloatArithmetic<T>("Select");
  lossgrad_emu::RequireSelectScratch("Select");
  if (count == 0) return;
  lossgrad_emu::NoPartialOverlap("Select", dst, count, src0, count);
  const T* a = src0.Data("Select", count);
  const auto* bits = reinterpret_cast<const uint8_t*>(mask.Data("Select", (count + 8 * sizeof(U) - 1) / (8 * sizeof(U))));
  T* d = dst.Data("Select", count);
  for (uint32_t i = 0; i < count; ++i) d[i] = (bits[i / 8] >> (i % 8)) & 1u ? a[i] : src1;
  lossgrad_emu::CountVector(static_cast<uint64_t>(count) * sizeof(T));
}

// ------------------------------------------------------------------ cast

template <typename D, typename S>
void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, const RoundMode& mode, const uint32_t count) {
  constexpr bool widen = std::is_same_v<D, float> && (std::is_same_v<S, half> || lossgrad_emu::kIsBf16<S>);
  constexpr bool to_half = std::is_same_v<D, half> && std::is_same_v<S, float>;
  constexpr bool to_bf16 = lossgrad_emu::kIsBf16<D> && std::is_same_v<S, float>;
  if constexpr (!(widen || to_half || to_bf16)) {
    lossgrad_emu::Fail("Cast", "only half/bfloat16 <-> float casts are emulated");
  } else {
    if (widen && mode != RoundMode::CAST_NONE) lossgrad_emu::Fail("Cast", "widening casts take CAST_NONE");
    if (to_bf16 && (mode == RoundMode::CAST_NONE || mode == RoundMode::CAST_ODD)) {
      lossgrad_emu::Fail("Cast", "float to bfloat16 needs CAST_RINT/FLOOR/CEIL/ROUND/TRUNC on Atlas A2/A3");
    }
    if (count == 0) return;
    if (widen) {
      const uint64_t d0 = dst.byte_offset(), d1 = d0 + count * sizeof(D);
      const uint64_t s0 = src.byte_offset(), s1 = s0 + count * sizeof(S);
      if (d0 < s1 && s0 < d1) lossgrad_emu::Fail("Cast", "a widening Cast must not overlap its source");
    }
    const S* s = src.Data("Cast", count);
    D* d = dst.Data("Cast", count);
    lossgrad_emu::CountVector(static_cast<uint64_t>(count) * std::max(sizeof(S), sizeof(D)));
    const lossgrad_emu::Rounding r = lossgrad_emu::ToRounding(static_cast<int>(mode));
    for (uint32_t i = 0; i < count; ++i) {
      if constexpr (widen) {
        d[i] = lossgrad_emu::Load(s[i]);
      } else if constexpr (to_half) {
        d[i] = half::FromBits(lossgrad_emu::HalfFormat::Narrow(s[i], r));
      } else {
        d[i] = bfloat16_t::FromBits(lossgrad_emu::Bf16Format::Narrow(s[i], r));
      }
    }
  }
}

}  // namespace AscendC
