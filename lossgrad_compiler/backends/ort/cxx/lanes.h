// 16 consecutive elements of a loop nest's innermost loop as one value, for the loop nests
// (backends/ort/lane_printer.py): the same operations in the same order on each lane as the
// scalar loop (which builds without these instruction sets run), so the same bits, with exp
// and log inline (vmath.h's 16-lane forms) where g++'s vectoriser would call their vector
// variants once per step and spill around each call.
//
// A float is floatx16 (vmath.h); a flag is a mask of 32-bit lanes, -1 or 0, which g++'s
// vector extension selects on (`mask ? a : b`); a half is its 16 storage words, widened and
// narrowed as half.h's chunks are. The loop position is never a vector: a comparison of the
// position i + k (k = 0..15, the lane) with a value u the row holds fixed is k against u - i,
// clamped to [-1, 16], which gives every lane the same answer (u - i is only formed where
// u >= i, so it cannot overflow) in 32-bit lanes.

namespace lossgrad {
namespace lanes {

#if defined(LOSSGRAD_VECTOR_LOG) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define LOSSGRAD_NEST_LANES 1  // the printed lane loops are compiled (lane_printer.py)
constexpr int64_t kLanes = 16;

typedef int32_t maskx16 __attribute__((vector_size(64)));

template <class T>
struct halfx16 {
  __m256i bits;
};

// A row's value on every lane.
inline floatx16 splat(float v) { return floatx16{} + v; }
inline maskx16 splat(bool flag) { return maskx16{} - static_cast<int32_t>(flag); }

// kMasked: the row's last, partial step, its first lanes given by `m` (first(n)); the
// other lanes are neither read nor written (AVX-512's masked moves do not fault on them)
// and compute on zeros, which no kept lane reads.
inline __mmask16 first(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

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

enum class Relation { kEq, kNe, kLt, kLe, kGt, kGe };

// Per lane k: (i + k) R u, for a position i >= 0 and a signed u.
template <Relation R>
inline maskx16 position_compare(int64_t i, int64_t u) {
  const int32_t d = u < i ? -1 : (u - i > kLanes ? static_cast<int32_t>(kLanes)
                                                  : static_cast<int32_t>(u - i));
  const maskx16 k = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const maskx16 v = maskx16{} + d;
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
