// Element storage types and the conversions of arith.extf / arith.truncf.
//
// float16 and bfloat16 are converted with branch-free bit arithmetic (selects, no calls into
// libgcc's soft-float helpers), in blocks, so the compiler vectorises the loads and stores.
// Every conversion rounds to nearest even, as arith.truncf does.

namespace lossgrad {

struct float16 {
  uint16_t bits;
};
struct bfloat16 {
  uint16_t bits;
};

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float widen(float16 h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t magnitude = h.bits & 0x7fffu;
  const uint32_t normal = (magnitude << 13) + 0x38000000u;  // rebias the exponent 15 -> 127
  const uint32_t inf_nan = (magnitude << 13) | 0x7f800000u;
  // Subnormals and zero: the 10-bit integer times 2^-24 is exact in float.
  const uint32_t subnormal = bits_of(static_cast<float>(static_cast<int32_t>(magnitude)) *
                                     5.9604644775390625e-8f);
  const uint32_t r = magnitude < 0x0400u ? subnormal : (magnitude >= 0x7c00u ? inf_nan : normal);
  return float_of(r | sign);
}

inline float widen(bfloat16 h) { return float_of(static_cast<uint32_t>(h.bits) << 16); }

inline float16 narrow_to_float16(float f) {
  const uint32_t all = bits_of(f);
  const uint32_t sign = (all >> 16) & 0x8000u;
  const uint32_t magnitude = all & 0x7fffffffu;
  // Normal results: round the 13 dropped bits to nearest even, then rebias 127 -> 15.
  const uint32_t odd = (magnitude >> 13) & 1u;
  const uint32_t normal = (magnitude + 0xc8000fffu + odd) >> 13;  // 0xc8000000 = (15-127) << 23
  // Subnormal results: adding 0.5 aligns the bits so the FPU rounds them to nearest even.
  const uint32_t subnormal = bits_of(float_of(magnitude) + 0.5f) - 0x3f000000u;
  const uint32_t overflow = magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN : inf
  uint32_t r = magnitude < 0x38800000u ? subnormal : normal;
  r = magnitude >= 0x47800000u ? overflow : r;
  return float16{static_cast<uint16_t>(r | sign)};
}

inline bfloat16 narrow_to_bfloat16(float f) {
  const uint32_t all = bits_of(f);
  const uint32_t rounded = (all + 0x7fffu + ((all >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (all >> 16) | 0x0040u;
  const bool is_nan = (all & 0x7fffffffu) > 0x7f800000u;
  return bfloat16{static_cast<uint16_t>(is_nan ? quiet_nan : rounded)};
}

// convert<To>(from): the value conversions level-2 bodies use (extf, truncf) and loads need.
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, float16> || std::is_same_v<From, bfloat16>) {
    return static_cast<To>(widen(v));
  } else if constexpr (std::is_same_v<To, float16>) {
    static_assert(std::is_same_v<From, float>, "truncf to f16 is only printed from f32");
    return narrow_to_float16(v);
  } else if constexpr (std::is_same_v<To, bfloat16>) {
    static_assert(std::is_same_v<From, float>, "truncf to bf16 is only printed from f32");
    return narrow_to_bfloat16(v);
  } else {
    return static_cast<To>(v);  // float <-> double: IEEE conversion, nearest even
  }
}

constexpr int64_t kBlock = 1024;  // elements per load/compute/store block (fits L1)

#if defined(__F16C__)
// With F16C (x86-64-v3 and newer) the hardware converts 8 halves per instruction, rounding to
// nearest even like narrow_to_float16; only NaN payloads may differ (both stay NaN).
inline void widen_contiguous(const float16* p, int64_t n, float* __restrict out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(p + i))));
  for (; i < n; ++i) out[i] = widen(p[i]);
}

inline void narrow_contiguous(const float* __restrict values, int64_t n, float16* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(values + i),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = narrow_to_float16(values[i]);
}
#endif

// A block of `n` values of operand storage T, `stride` elements apart (0 = broadcast), as C.
// Returns `p` itself when no conversion or gather is needed.
template <class C, class T>
inline const C* load_block(const T* p, int64_t stride, int64_t n, C* __restrict buf) {
  if constexpr (std::is_same_v<C, T>) {
    if (stride == 1) return p;
  }
  if (stride == 0) {
    const C v = convert<C>(p[0]);
    for (int64_t i = 0; i < n; ++i) buf[i] = v;
  } else if (stride == 1) {
#if defined(__F16C__)
    if constexpr (std::is_same_v<T, float16> && std::is_same_v<C, float>) {
      widen_contiguous(p, n, buf);
      return buf;
    }
#endif
    for (int64_t i = 0; i < n; ++i) buf[i] = convert<C>(p[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) buf[i] = convert<C>(p[i * stride]);
  }
  return buf;
}

template <class T, class C>
inline void store_block(T* __restrict out, const C* __restrict values, int64_t n) {
#if defined(__F16C__)
  if constexpr (std::is_same_v<T, float16> && std::is_same_v<C, float>) {
    narrow_contiguous(values, n, out);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = convert<T>(values[i]);
}

}  // namespace lossgrad
