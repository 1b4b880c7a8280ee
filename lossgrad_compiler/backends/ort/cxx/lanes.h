// Consecutive elements of a loop nest's innermost loop as one value, 16 with AVX-512 and 8
// with AVX2 (kLanes), for the loop nests (backends/ort/lane_printer.py): the same operations
// in the same order on each lane as the scalar loop (which other builds run), so the same
// bits, with exp and log inline (vmath.h's lane forms) where g++'s vectoriser would call
// their vector variants once per step and spill around each call.
//
// A float is floatx16 or floatx8 (vmath.h); a flag is a mask of 32-bit lanes, -1 or 0, which
// g++'s vector extension selects on (`mask ? a : b`); a half is its storage words, widened
// and narrowed as half.h's conversions are. The loop position is never a vector: a
// comparison of the position i + k (k = 0..kLanes-1, the lane) with a value u the row holds
// fixed is k against u - i, clamped to [-1, kLanes], which gives every lane the same answer
// (u - i is only formed where u >= i, so it cannot overflow) in 32-bit lanes.
//
// A row's last, partial step is masked (kMasked, its lanes given by `first(n)`, a Tail): the
// other lanes are neither read nor written and compute on zeros, which no kept lane reads.

namespace lossgrad {
namespace lanes {

#if defined(LOSSGRAD_VECTOR_LOG) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define LOSSGRAD_NEST_LANES 1  // the printed lane loops are compiled (lane_printer.py)
constexpr int64_t kLanes = 16;

typedef int32_t maskx16 __attribute__((vector_size(64)));
typedef maskx16 mask;
typedef __mmask16 Tail;

template <class T>
struct halfx16 {
  __m256i bits;
};

// A row's value on every lane.
inline floatx16 splat(float v) { return floatx16{} + v; }
inline maskx16 splat(bool flag) { return maskx16{} - static_cast<int32_t>(flag); }

// AVX-512's masked moves do not fault on the lanes they leave out.
inline Tail first(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

template <bool kMasked>
inline floatx16 load(const float* p, __mmask16 m) {
  if constexpr (kMasked) return reinterpret_cast<floatx16>(_mm512_maskz_loadu_ps(m, p));
  floatx16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <bool kMasked, class T>
inline halfx16<T> load(const T* p, __mmask16 m) {
  if constexpr (kMasked) return {_mm256_maskz_loadu_epi16(m, p)};
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))};
}

template <class T>
inline floatx16 widen(halfx16<T> h) {
  floatx16 v;
  widen_chunk(reinterpret_cast<const T*>(&h.bits), reinterpret_cast<float*>(&v));
  return v;
}
template <class T>
inline halfx16<T> narrow(floatx16 v) {
  return {narrow_chunk_lanes<T>(reinterpret_cast<__m512>(v))};
}

// kStream: a non-temporal store (`p` on a 64-byte boundary for floats, 32 for halves).
template <bool kStream, bool kMasked>
inline void store(float* p, floatx16 v, __mmask16 m) {
  if constexpr (kMasked)
    _mm512_mask_storeu_ps(p, m, reinterpret_cast<__m512>(v));
  else if constexpr (kStream)
    _mm512_stream_ps(p, reinterpret_cast<__m512>(v));
  else
    std::memcpy(p, &v, sizeof v);
}
template <bool kStream, bool kMasked, class T>
inline void store(T* p, halfx16<T> h, __mmask16 m) {
  if constexpr (kMasked)
    _mm256_mask_storeu_epi16(p, m, h.bits);
  else if constexpr (kStream)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), h.bits);
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h.bits);
}

#elif defined(LOSSGRAD_LANES8) && defined(__F16C__)
#define LOSSGRAD_NEST_LANES 1  // the printed lane loops are compiled (lane_printer.py)
constexpr int64_t kLanes = 8;

typedef int32x8 mask;
typedef int64_t Tail;  // the number of lanes the masked step keeps

template <class T>
struct halfx8 {
  __m128i bits;
};

inline floatx8 splat(float v) { return floatx8{} + v; }
inline mask splat(bool flag) { return mask{} - static_cast<int32_t>(flag); }

inline Tail first(int64_t n) { return n; }

// The lanes below n, as AVX's masked moves take them (they do not fault on the others).
inline __m256i kept(Tail n) {
  const int32x8 k = {0, 1, 2, 3, 4, 5, 6, 7};
  return reinterpret_cast<__m256i>(k < static_cast<int32_t>(n));
}

template <bool kMasked>
inline floatx8 load(const float* p, Tail n) {
  if constexpr (kMasked) return reinterpret_cast<floatx8>(_mm256_maskload_ps(p, kept(n)));
  floatx8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// Halves have no masked move in AVX2: the kept words are copied into zeros.
template <bool kMasked, class T>
inline halfx8<T> load(const T* p, Tail n) {
  if constexpr (kMasked) {
    __m128i bits = _mm_setzero_si128();
    std::memcpy(&bits, p, static_cast<size_t>(n) * sizeof(T));
    return {bits};
  }
  return {_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))};
}

// half.h's widen, exact for both types (F16C widens a float16 as widen_contiguous does).
template <class T>
inline floatx8 widen(halfx8<T> h) {
  if constexpr (std::is_same_v<T, float16>) {
    return reinterpret_cast<floatx8>(_mm256_cvtph_ps(h.bits));
  } else {
    static_assert(std::is_same_v<T, bfloat16>, "lanes widen float16 or bfloat16");
    return reinterpret_cast<floatx8>(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h.bits), 16));
  }
}

// narrow_to_float16 (F16C, nearest even) and narrow_to_bfloat16 on 8 lanes.
template <class T>
inline halfx8<T> narrow(floatx8 v) {
  if constexpr (std::is_same_v<T, float16>) {
    return {_mm256_cvtps_ph(reinterpret_cast<__m256>(v),
                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
  } else {
    static_assert(std::is_same_v<T, bfloat16>, "lanes narrow to float16 or bfloat16");
    const uint32x8 all = reinterpret_cast<uint32x8>(v);
    const uint32x8 rounded = (all + 0x7fffu + ((all >> 16) & 1u)) >> 16;
    const uint32x8 quiet_nan = (all >> 16) | 0x0040u;
    const int32x8 is_nan = reinterpret_cast<int32x8>(all & 0x7fffffffu) > 0x7f800000;
    const __m256i words = reinterpret_cast<__m256i>(is_nan ? quiet_nan : rounded);
    // packus works within 128-bit halves: the low quarter of each holds the 4 words.
    const __m256i packed = _mm256_packus_epi32(words, words);
    return {_mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08))};
  }
}

// kStream: a non-temporal store (`p` on a 32-byte boundary for floats, 16 for halves).
template <bool kStream, bool kMasked>
inline void store(float* p, floatx8 v, Tail n) {
  if constexpr (kMasked)
    _mm256_maskstore_ps(p, kept(n), reinterpret_cast<__m256>(v));
  else if constexpr (kStream)
    _mm256_stream_ps(p, reinterpret_cast<__m256>(v));
  else
    std::memcpy(p, &v, sizeof v);
}
template <bool kStream, bool kMasked, class T>
inline void store(T* p, halfx8<T> h, Tail n) {
  if constexpr (kMasked)
    std::memcpy(p, &h.bits, static_cast<size_t>(n) * sizeof(T));
  else if constexpr (kStream)
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), h.bits);
  else
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h.bits);
}
#endif

#if defined(LOSSGRAD_NEST_LANES)
// 0, 1, ..., kLanes - 1.
inline mask lane_numbers() {
  mask k = {};
  for (int32_t lane = 0; lane < static_cast<int32_t>(kLanes); ++lane) k[lane] = lane;
  return k;
}

enum class Relation { kEq, kNe, kLt, kLe, kGt, kGe };

// Per lane k: (i + k) R u, for a position i >= 0 and a signed u.
template <Relation R>
inline mask position_compare(int64_t i, int64_t u) {
  const int32_t d = u < i ? -1 : (u - i > kLanes ? static_cast<int32_t>(kLanes)
                                                  : static_cast<int32_t>(u - i));
  const mask k = lane_numbers();
  const mask v = mask{} + d;
  if constexpr (R == Relation::kEq) return k == v;
  else if constexpr (R == Relation::kNe) return k != v;
  else if constexpr (R == Relation::kLt) return k < v;
  else if constexpr (R == Relation::kLe) return k <= v;
  else if constexpr (R == Relation::kGt) return k > v;
  else return k >= v;
}

// $LOSSGRAD_ORT_NEST_LANES=0 runs every loop nest's rows in the scalar loop alone (read once
// per process): tests/ort/test_ort_class_lanes.py compares the two forms' bits.
inline bool enabled() {
  static const bool on = [] {
    const char* configured = std::getenv("LOSSGRAD_ORT_NEST_LANES");
    return configured == nullptr || std::strcmp(configured, "0") != 0;
  }();
  return on;
}

// Whether a call's result is written past the cache (stream.h's threshold) with every lane
// store on its boundary: `out` and each row stride (in bytes) on 64 bytes.
inline bool streams(const void* out, int64_t result_bytes, int64_t moved_bytes,
                    std::initializer_list<int64_t> row_strides_bytes) {
  if (moved_bytes <= stream_above_bytes() || result_bytes < 64) return false;
  if (reinterpret_cast<uintptr_t>(out) % 64 != 0) return false;
  for (const int64_t stride : row_strides_bytes)
    if (stride % 64 != 0) return false;
  return true;
}
#endif

}  // namespace lanes
}  // namespace lossgrad
