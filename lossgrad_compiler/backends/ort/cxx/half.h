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

// std::bit_cast (C++20) for the C++17 the library is built as.
template <class To, class From>
inline To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different sizes");
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}

inline uint32_t bits_of(float f) { return bit_cast<uint32_t>(f); }
inline float float_of(uint32_t u) { return bit_cast<float>(u); }
inline uint64_t bits_of(double d) { return bit_cast<uint64_t>(d); }
inline double double_of(uint64_t u) { return bit_cast<double>(u); }

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

// float64 -> a 16-bit float with M mantissa bits and exponent bias B (float16: 10, 15;
// bfloat16: 7, 127) in one rounding to nearest even, as arith.truncf from f64 does: narrowing
// through float would round twice. Normal results drop 52 - M mantissa bits and rebias the
// exponent; subnormal ones come from adding 2^(53-B-M), whose ulp is the smallest subnormal.
template <int M, int B>
inline uint16_t narrow_double_bits(double d) {
  constexpr int kDropped = 52 - M;
  constexpr uint64_t kInfinity = uint64_t{2 * B + 1} << M;
  const auto power_of_two_bits = [](int e) { return uint64_t(1023 + e) << 52; };
  const uint64_t all = bits_of(d);
  const uint64_t sign = (all >> 48) & 0x8000u;
  const uint64_t magnitude = all & 0x7fffffffffffffffu;
  const uint64_t odd = (magnitude >> kDropped) & 1u;
  const uint64_t half_ulp = (uint64_t{1} << (kDropped - 1)) - 1;
  const uint64_t normal = ((magnitude + half_ulp + odd) >> kDropped) - (uint64_t{1023 - B} << M);
  const double unit = double_of(power_of_two_bits(53 - B - M));
  const uint64_t subnormal = bits_of(double_of(magnitude) + unit) - bits_of(unit);
  const uint64_t overflow = magnitude > 0x7ff0000000000000u ? kInfinity | (1u << (M - 1))
                                                             : kInfinity;  // NaN : inf
  uint64_t r = magnitude < power_of_two_bits(1 - B) ? subnormal : normal;
  r = magnitude >= power_of_two_bits(B + 1) ? overflow : r;
  return static_cast<uint16_t>(r | sign);
}

inline float16 narrow_to_float16(double d) { return float16{narrow_double_bits<10, 15>(d)}; }
inline bfloat16 narrow_to_bfloat16(double d) { return bfloat16{narrow_double_bits<7, 127>(d)}; }

// The storage type of an operand, known at run time: one kernel (one compute type) serves
// every combination of input types that promotes to it.
enum class Element { kFloat16, kBFloat16, kFloat32, kFloat64 };

// convert<To>(from): the value conversions level-2 bodies use (extf, truncf) and loads need.
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, float16> || std::is_same_v<From, bfloat16>) {
    return static_cast<To>(widen(v));
  } else if constexpr (std::is_same_v<To, float16> || std::is_same_v<To, bfloat16>) {
    static_assert(std::is_same_v<From, float> || std::is_same_v<From, double>,
                  "truncf to a half type is printed from f32 or f64");
    if constexpr (std::is_same_v<To, float16>) return narrow_to_float16(v);
    else return narrow_to_bfloat16(v);
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

#if defined(__AVX2__)
// narrow_to_bfloat16 on 16 floats per step: g++ vectorises the scalar form, but packs the
// 32-bit lanes to 16 bits poorly (several times slower than this; docs/benchmarks.md, "The
// figures behind the kernels' choices").
inline void narrow_contiguous(const float* __restrict values, int64_t n, bfloat16* out) {
  const __m256i round_bias = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i infinity = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x0040);
  auto narrow8 = [&](const float* p) {
    const __m256i all = _mm256_castps_si256(_mm256_loadu_ps(p));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(all, 16), one);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(all, round_bias), odd), 16);
    const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(all, 16), quiet);
    const __m256i is_nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(all, magnitude_mask), infinity);
    return _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // packus works within 128-bit lanes: reorder the 64-bit quarters afterwards.
    const __m256i packed = _mm256_packus_epi32(narrow8(values + i), narrow8(values + i + 8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm256_permute4x64_epi64(packed, 0xd8));
  }
  for (; i < n; ++i) out[i] = narrow_to_bfloat16(values[i]);
}
#endif

// The storage types this build has a vector narrow_contiguous from float for.
template <class T>
constexpr bool kNarrowsInVectors =
#if defined(__F16C__)
    std::is_same_v<T, float16> ||
#endif
#if defined(__AVX2__)
    std::is_same_v<T, bfloat16> ||
#endif
    false;

// Chunks of kChunk half values converted in registers, for the fused elementwise path
// (iteration.h): widened, computed and narrowed without a trip through a block buffer. The
// conversions are those of widen and narrow_to_* above (F16C rounds to nearest even like
// narrow_to_float16; only NaN payloads may differ, as for narrow_contiguous).
constexpr int kChunk = 16;

template <class T>
inline void widen_chunk(const T* p, float* __restrict out) {
#if defined(__AVX512F__)
  const __m256i halves = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (std::is_same_v<T, float16>) {
    _mm512_storeu_ps(out, _mm512_cvtph_ps(halves));
  } else {
    static_assert(std::is_same_v<T, bfloat16>, "widen_chunk reads float16 or bfloat16");
#if defined(__AVX512BW__)
    // One word permute puts each bfloat16 in the high half of a zeroed 32-bit lane (a zero
    // extension and a shift are two instructions).
    const __m512i to_high_words = _mm512_set_epi16(15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0,
                                                   8, 0, 7, 0, 6, 0, 5, 0, 4, 0, 3, 0, 2, 0, 1, 0,
                                                   0, 0);
    const __m512i wide = _mm512_maskz_permutexvar_epi16(0xaaaaaaaau, to_high_words,
                                                        _mm512_castsi256_si512(halves));
#else
    const __m512i wide = _mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16);
#endif
    _mm512_storeu_ps(out, _mm512_castsi512_ps(wide));
  }
#else
#if defined(__F16C__)
  if constexpr (std::is_same_v<T, float16>) {
    widen_contiguous(p, kChunk, out);
    return;
  }
#endif
  for (int i = 0; i < kChunk; ++i) out[i] = widen(p[i]);
#endif
}

#if defined(__AVX512F__)
constexpr int kFpclassDenormal = 0x20;  // vfpclassps's category: nonzero, zero exponent

// narrow_to_bfloat16 on 16 lanes: round the low half to nearest even, quiet a NaN.
inline __m256i narrow_bfloat16_lanes(__m512 values) {
  const __m512i all = _mm512_castps_si512(values);
  const __m512i high = _mm512_srli_epi32(all, 16);
  const __m512i odd = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(_mm512_add_epi32(all, _mm512_set1_epi32(0x7fff)), odd), 16);
  const __m512i quiet_nan = _mm512_or_si512(high, _mm512_set1_epi32(0x0040));
  const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(
      _mm512_and_si512(all, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, quiet_nan));
}

// The same with AVX512-BF16's one-instruction conversion, which gives these bits for every
// float (NaN included; checked over all 2^32) except subnormal ones, which it flushes to
// zero: lanes holding a subnormal take the integer rounding above.
inline __m256i narrow_bfloat16_chunk(__m512 values) {
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  const __mmask16 subnormal = _mm512_fpclass_ps_mask(values, kFpclassDenormal);
  const __m256bh converted = _mm512_cvtneps_pbh(values);
  __m256i bits;
  std::memcpy(&bits, &converted, sizeof bits);
  if (__builtin_expect(subnormal != 0, 0))
    bits = _mm256_mask_blend_epi16(subnormal, bits, narrow_bfloat16_lanes(values));
  return bits;
#else
  return narrow_bfloat16_lanes(values);
#endif
}
#endif

#if defined(__AVX512F__)
// 16 floats narrowed to T in a register: the one conversion of a chunk that narrow_chunk and
// narrow_chunk_pair share.
template <class T>
inline __m256i narrow_chunk_lanes(__m512 values) {
  if constexpr (std::is_same_v<T, float16>) {
    return _mm512_cvtps_ph(values, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else {
    static_assert(std::is_same_v<T, bfloat16>, "a chunk narrows to float16 or bfloat16");
    return narrow_bfloat16_chunk(values);
  }
}
#endif

// With kStream the chunk (32 bytes, `out` on a 32-byte boundary) is written with a
// non-temporal store.
template <bool kStream = false, class T>
inline void narrow_chunk(const float* __restrict values, T* out) {
#if defined(__AVX512F__)
  const __m256i halves = narrow_chunk_lanes<T>(_mm512_loadu_ps(values));
  if constexpr (kStream)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(out), halves);
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), halves);
#else
  static_assert(!kStream, "only the AVX-512 chunk streams its stores");
  if constexpr (kNarrowsInVectors<T>) {
    narrow_contiguous(values, kChunk, out);
    return;
  }
  for (int i = 0; i < kChunk; ++i) out[i] = convert<T>(values[i]);
#endif
}

// Two chunks narrowed to `out` (64 bytes; with kStream on a 64-byte boundary, written with
// one non-temporal store, a whole line). For bfloat16 with AVX512-BF16 both convert in one
// instruction, with one subnormal test for the two: faster than two chunks narrowed one by
// one, each with its own test (a C loop of SmoothL1LossBackward's body in L1).
// float16 has no test to share: fused_half_chunks pairs its chunks only to stream them.
// Always inlined: called as a function, the two chunks' values went through memory, and
// SmoothL1LossBackward bfloat16 0-d ran about half as fast (docs/benchmarks.md, "The figures
// behind the kernels' choices").
template <bool kStream = false, class T>
__attribute__((always_inline)) inline void narrow_chunk_pair(const float* __restrict first,
                                                             const float* __restrict second,
                                                             T* out) {
#if defined(__AVX512F__)
  const __m512 v0 = _mm512_loadu_ps(first);
  const __m512 v1 = _mm512_loadu_ps(second);
  const auto store = [out](__m512i halves) {
    if constexpr (kStream)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out), halves);
    else
      _mm512_storeu_si512(out, halves);
  };
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if constexpr (std::is_same_v<T, bfloat16>) {
    const __mmask16 subnormal = _mm512_fpclass_ps_mask(v0, kFpclassDenormal) |
                                _mm512_fpclass_ps_mask(v1, kFpclassDenormal);
    if (__builtin_expect(subnormal == 0, 1)) {
      const __m512bh converted = _mm512_cvtne2ps_pbh(v1, v0);
      __m512i halves;
      std::memcpy(&halves, &converted, sizeof halves);
      store(halves);
      return;
    }
  }
#endif
  store(_mm512_inserti64x4(_mm512_castsi256_si512(narrow_chunk_lanes<T>(v0)),
                           narrow_chunk_lanes<T>(v1), 1));
#else
  narrow_chunk<kStream>(first, out);
  narrow_chunk<kStream>(second, out + kChunk);
#endif
}

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
  if constexpr (std::is_same_v<C, float> && kNarrowsInVectors<T>) {
    narrow_contiguous(values, n, out);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = convert<T>(values[i]);
}

}  // namespace lossgrad
