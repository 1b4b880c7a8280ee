// math.log and math.exp as inline, branch-free functions the compiler can vectorise.
//
// std::log and std::exp are calls into libm, one element at a time, and they bound the
// kernels that use them (KlDivTargetBackward) far below memory bandwidth. These use the
// classic reductions (log: x = m * 2^k with m in [sqrt(2)/2, sqrt(2)); exp: x = k ln2 + r with
// |r| <= ln2/2 and a Taylor polynomial), evaluated in the compute type, with every special
// case (0, subnormals, negatives, inf, NaN, overflow, gradual underflow) resolved by selects
// instead of branches. The float log has two forms: a polynomial in m-1 with fused
// multiply-adds where the build has FMA, the odd series in s = (m-1)/(m+1) where it has not.
// The float exp evaluates the same Taylor series both ways, with fused multiply-adds where
// the build has FMA. So the float functions' bits depend on whether the library is
// built with FMA (results stay the same from run to run and across thread counts). A g++
// build with AVX-512 also gives both FMA forms 16-lane variants that vectorised loops call,
// with the same bits. Measured against the correctly rounded result (every positive float
// for float log; every 7th float for exp; 2e7 random doubles), the largest errors are 0.827
// ulp (float log, FMA) and 0.835 ulp (without), 0.925 ulp (float exp, FMA) and 1.02 ulp
// (without), 0.77 ulp (double log) and 0.96 ulp (double exp); tests/test_ort_numerics.py keeps
// them there, built both ways.

// Bit views (bits_of, float_of, double_of) come from half.h.
namespace lossgrad {

// Coefficients of log(1+f) = 2s + s*(Lg1 s^2 + Lg2 s^4 + ...) with s = f/(2+f) (the fdlibm
// minimax fits), and ln 2 split so that k * kLn2Hi is exact.
namespace log_coefficients {
constexpr float kF1 = 6.6666662693e-01f, kF2 = 4.0000972152e-01f, kF3 = 2.8498786688e-01f,
                kF4 = 2.4279078841e-01f;
constexpr float kFLn2Hi = 6.9313812256e-01f, kFLn2Lo = 9.0580006145e-06f;
// Cephes' logf: log1p(f) = f - f^2/2 + f^3 (kP0 f^8 + ... + kP8), and ln 2 split so that
// k * kCephesLn2Hi is exact.
constexpr float kP0 = 7.0376836292e-2f, kP1 = -1.1514610310e-1f, kP2 = 1.1676998740e-1f,
                kP3 = -1.2420140846e-1f, kP4 = 1.4249322787e-1f, kP5 = -1.6668057665e-1f,
                kP6 = 2.0000714765e-1f, kP7 = -2.4999993993e-1f, kP8 = 3.3333331174e-1f;
constexpr float kCephesLn2Hi = 0.693359375f, kCephesLn2Lo = -2.12194440e-4f;
constexpr double kD1 = 6.666666666666735130e-01, kD2 = 3.999999999940941908e-01,
                 kD3 = 2.857142874366239149e-01, kD4 = 2.222219843214978396e-01,
                 kD5 = 1.818357216161805012e-01, kD6 = 1.531383769920937332e-01,
                 kD7 = 1.479819860511658591e-01;
constexpr double kDLn2Hi = 6.93147180369123816490e-01, kDLn2Lo = 1.90821492927058770002e-10;
}  // namespace log_coefficients

// The value at the special inputs, else `finite` (the result for a positive normal x). A
// negative x gives x86's default NaN (sign set), as the vector form's fix-up does.
template <class C>
inline C log_special(C x, C finite) {
  const C inf = std::numeric_limits<C>::infinity();
  C r = finite;
  r = x == C(0) ? -inf : r;
  r = x < C(0) ? -std::numeric_limits<C>::quiet_NaN() : r;
  r = x == inf ? inf : r;
  return x != x ? x + x : r;  // NaN in, (quiet) NaN out
}

// x = 2^k * (1 + f) with 1 + f in [sqrt(2)/2, sqrt(2)), both exact; subnormal x are scaled
// into the normal range first.
struct FloatLogReduction {
  float f;
  float k;
};

inline FloatLogReduction reduce_for_log(float x) {
  const bool subnormal = x < std::numeric_limits<float>::min();
  const float scaled = subnormal ? x * 0x1p25f : x;
  // m = scaled / 2^k in [sqrt(2)/2, sqrt(2)): subtract sqrt(2)/2's bits, read k, add back.
  constexpr uint32_t kHalfSqrt2 = 0x3f3504f3u;
  const uint32_t shifted = bits_of(scaled) - kHalfSqrt2;
  const int32_t k = (static_cast<int32_t>(shifted) >> 23) - (subnormal ? 25 : 0);
  const float m = float_of((shifted & 0x007fffffu) + kHalfSqrt2);
  return {m - 1.0f, static_cast<float>(k)};
}

// 2^k for k in float's normal exponent range, from its bits.
inline float pow2(int32_t k) { return float_of(static_cast<uint32_t>(k + 127) << 23); }

// The float exp's constants, for both of its forms (with and without FMA):
// kf = round(x / ln2), r = x - kf ln2 in two steps (kf * ln2_hi is exact).
struct ExpReduction {
  // Past these, exp is inf or rounds to 0; clamping keeps 2^k representable below.
  static constexpr float kLowest = -104.0f, kHighest = 89.0f;
  // Within these kf is in [-125, 127], so p * 2^kf is normal and exact.
  static constexpr float kDirectLowest = -86.5f, kDirectHighest = 88.0f;
  static constexpr float kRound = 0x1.8p23f;  // adding it rounds to an integer (nearest even)
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kLn2Hi = 6.93145751953125e-01f, kLn2Lo = 1.42860682030941723e-06f;
};

// exp(x) = p * 2^kf with p = exp(r): two exact power-of-two factors, so a subnormal result is
// rounded once; a NaN x gives x + x.
inline float scale_exp(float x, float p, float kf) {
  const int32_t k = static_cast<int32_t>(kf);
  const int32_t k1 = k >> 1;
  const float e = p * pow2(k1) * pow2(k - k1);
  return x != x ? x + x : e;
}

#if defined(__FMA__)
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#define LOSSGRAD_VECTOR_LOG 1  // and the float exp's variant beside it
#endif

// The operations the FMA form is written in, for a float and, with the vector variant, for 16
// floats: both evaluate the same expression, operation for operation.
template <class F>
F splat(float v);
template <>
inline float splat<float>(float v) {
  return v;
}
inline float fused(float a, float b, float c) { return std::fma(a, b, c); }
#if defined(LOSSGRAD_VECTOR_LOG)
template <>
inline __m512 splat<__m512>(float v) {
  return _mm512_set1_ps(v);
}
inline __m512 fused(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
#endif
#if defined(__AVX2__) && !defined(LOSSGRAD_VECTOR_LOG)
// Without AVX-512: log_fma and exp_fma on 8 lanes (AVX2), for the loop nests' lane loops
// (cxx/lanes.h). Every operation is the scalar form's, in its order, on each lane (g++'s
// vector extension: arithmetic, comparisons giving -1 or 0, ?: selecting on them), so every
// input gives the scalar bits (tests/ort/test_ort_numerics.py checks it).
#define LOSSGRAD_LANES8 1
typedef float floatx8 __attribute__((vector_size(32)));
typedef int32_t int32x8 __attribute__((vector_size(32)));
typedef uint32_t uint32x8 __attribute__((vector_size(32)));
template <>
inline floatx8 splat<floatx8>(float v) {
  return floatx8{} + v;
}
inline floatx8 fused(floatx8 a, floatx8 b, floatx8 c) {
  return reinterpret_cast<floatx8>(_mm256_fmadd_ps(reinterpret_cast<__m256>(a),
                                                   reinterpret_cast<__m256>(b),
                                                   reinterpret_cast<__m256>(c)));
}
#endif

// With FMA hardware: k ln2 + log1p(f) from reduce_for_log's f and k, with Cephes' log1p(f) =
// f - f^2/2 + f^3 P(f), P of degree 8 evaluated by Estrin's scheme, every a*b+c one fused
// multiply-add (std::fma: exactly rounded on every machine). No division: faster than the
// form below in a loop of KlDivTargetBackward's body (docs/benchmarks.md, "The figures behind
// the kernels' choices"); largest error over every positive float 0.827 ulp (the form below:
// 0.835).
template <class F>
inline F log_from_reduction(F f, F kf) {
  using namespace log_coefficients;
  const auto c = [](float v) { return splat<F>(v); };
  const F f2 = f * f;
  const F f4 = f2 * f2;
  const F p01 = fused(c(kP0), f, c(kP1)), p23 = fused(c(kP2), f, c(kP3));
  const F p45 = fused(c(kP4), f, c(kP5)), p67 = fused(c(kP6), f, c(kP7));
  const F p = fused(fused(fused(p01, f2, p23), f4, fused(p45, f2, p67)), f, c(kP8));
  F y = (f * f2) * p;
  y = fused(kf, c(kCephesLn2Lo), y);
  y = fused(c(-0.5f), f2, y);
  return fused(kf, c(kCephesLn2Hi), f + y);
}

inline float log_fma(float x) {
  const auto [f, kf] = reduce_for_log(x);
  return log_special(x, log_from_reduction(f, kf));
}

// The float exp's polynomial (the Taylor series to r^7 of the form without FMA below), with
// every a*b+c one fused multiply-add, for a float and, with the vector variant, for 16
// floats: p = exp(r) = 1 + r (1 + r q(r)). The caller scales p by 2^kf.
template <class F>
inline F exp_polynomial(F r) {
  const auto c = [](float v) { return splat<F>(v); };
  F q = fused(c(1.0f / 5040.0f), r, c(1.0f / 720.0f));
  q = fused(q, r, c(1.0f / 120.0f));
  q = fused(q, r, c(1.0f / 24.0f));
  q = fused(q, r, c(1.0f / 6.0f));
  q = fused(q, r, c(0.5f));
  // 1 + r (1 + r q): each fused step rounds once, the last at the result's scale.
  return fused(r, fused(r, q, c(1.0f)), c(1.0f));
}

inline float exp_fma(float x) {
  using R = ExpReduction;
  const float clamped = std::min(std::max(x, R::kLowest), R::kHighest);
  const float kf = fused(clamped, R::kLog2e, R::kRound) - R::kRound;
  const float r = fused(-kf, R::kLn2Lo, fused(-kf, R::kLn2Hi, clamped));
  return scale_exp(x, exp_polynomial(r), kf);
}

#if defined(LOSSGRAD_LANES8)
// reduce_for_log, log_from_reduction and log_special, lane by lane.
inline floatx8 log_fma8(floatx8 x) {
  using F = floatx8;
  const auto c = [](float v) { return splat<F>(v); };
  constexpr uint32_t kHalfSqrt2 = 0x3f3504f3u;
  const int32x8 subnormal = x < c(std::numeric_limits<float>::min());
  const F scaled = subnormal ? x * c(0x1p25f) : x;
  const uint32x8 shifted = reinterpret_cast<uint32x8>(scaled) - kHalfSqrt2;
  const int32x8 k = (reinterpret_cast<int32x8>(shifted) >> 23) - (subnormal & 25);
  const F m = reinterpret_cast<F>((shifted & 0x007fffffu) + kHalfSqrt2);
  F r = log_from_reduction(m - c(1.0f), __builtin_convertvector(k, F));
  const F inf = c(std::numeric_limits<float>::infinity());
  r = x == c(0.0f) ? -inf : r;
  r = x < c(0.0f) ? c(-std::numeric_limits<float>::quiet_NaN()) : r;
  r = x == inf ? inf : r;
  return x != x ? x + x : r;
}

// exp_fma lane by lane. Where every lane lies in [kDirectLowest, kDirectHighest] (no clamp,
// no NaN, kf in [-125, 127]), p * 2^kf is a normal float, so scale_exp's two exact factors
// give p with kf added to its exponent: one integer addition, where the factors take seven
// operations and the clamp and the NaN test five. Other steps take the whole form, in which
// std::max(x, lo), (x < lo) ? lo : x, is maxps(lo, x) (the second operand where either is
// NaN), std::min(y, hi), (hi < y) ? hi : y, is minps(hi, y), and fnmadd(kf, a, b) is
// fma(-kf, a, b) bit for bit (the negation is exact): one instruction each instead of a
// compare and a blend, or a negation and an FMA.
inline floatx8 exp_fma8(floatx8 x) {
  using R = ExpReduction;
  using F = floatx8;
  const auto c = [](float v) { return _mm256_set1_ps(v); };
  const __m256 v = reinterpret_cast<__m256>(x);
  const __m256 inside = _mm256_and_ps(_mm256_cmp_ps(v, c(R::kDirectLowest), _CMP_GE_OQ),
                                      _mm256_cmp_ps(v, c(R::kDirectHighest), _CMP_LE_OQ));
  if (__builtin_expect(_mm256_movemask_ps(inside) == 0xff, 1)) {
    const __m256 t = _mm256_fmadd_ps(v, c(R::kLog2e), c(R::kRound));
    const __m256 kf = _mm256_sub_ps(t, c(R::kRound));
    const F r = reinterpret_cast<F>(
        _mm256_fnmadd_ps(kf, c(R::kLn2Lo), _mm256_fnmadd_ps(kf, c(R::kLn2Hi), v)));
    // t's bits are kRound's plus k, whose low 23 bits are 0: t << 23 is k << 23.
    return reinterpret_cast<F>(reinterpret_cast<uint32x8>(exp_polynomial(r)) +
                               (reinterpret_cast<uint32x8>(t) << 23));
  }
  const __m256 clamped = _mm256_min_ps(c(R::kHighest), _mm256_max_ps(c(R::kLowest), v));
  const __m256 kf = _mm256_sub_ps(_mm256_fmadd_ps(clamped, c(R::kLog2e), c(R::kRound)),
                                  c(R::kRound));
  const F r = reinterpret_cast<F>(
      _mm256_fnmadd_ps(kf, c(R::kLn2Lo), _mm256_fnmadd_ps(kf, c(R::kLn2Hi), clamped)));
  const int32x8 k = __builtin_convertvector(reinterpret_cast<F>(kf), int32x8);
  const int32x8 k1 = k >> 1;
  const auto pow2 = [](int32x8 e) {
    return reinterpret_cast<F>(reinterpret_cast<uint32x8>(e + 127) << 23);
  };
  const F e = exp_polynomial(r) * pow2(k1) * pow2(k - k1);
  return x != x ? x + x : e;
}
#endif

#if defined(LOSSGRAD_VECTOR_LOG)
// log_fma on 16 lanes with AVX-512's exact helpers: getexp/getmant read k and m (subnormal
// inputs included) in three instructions where the scalar form needs a scale and a select,
// and one fix-up instruction sets the special inputs where it needs four compares and
// selects. The rest is log_from_reduction, so every one of the 2^32 inputs gives the scalar
// form's bits (tests/test_ort_numerics.py checks it).
inline __m512 log_fma16(__m512 x) {
  const __m512 m1 = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero);  // [1, 2)
  const __m512 e = _mm512_getexp_ps(x);
  // m = m1 / 2 and k = e + 1 from sqrt(2) up: m in [sqrt(2)/2, sqrt(2)) as reduce_for_log's
  const __mmask16 high = _mm512_cmp_ps_mask(m1, _mm512_set1_ps(0x1.6a09e6p+0f), _CMP_GE_OQ);
  const __m512 m = _mm512_mask_mul_ps(m1, high, m1, _mm512_set1_ps(0.5f));
  const __m512 f = _mm512_sub_ps(m, _mm512_set1_ps(1.0f));
  const __m512 kf = _mm512_mask_add_ps(e, high, e, _mm512_set1_ps(1.0f));
  // Per class of x, nibble by nibble from the lowest: QNaN and SNaN -> x quieted (2), 0 -> -inf
  // (4), +1 -> finite (0), -inf -> default NaN (3), +inf -> +inf (5), negative -> default NaN
  // (3), positive -> finite (0).
  return _mm512_fixupimm_ps(log_from_reduction(f, kf), x, _mm512_set1_epi32(0x03530422), 0);
}

// exp_fma on 16 lanes: the same operations, and AVX-512's scalef for p * 2^kf, which rounds
// once as exp_fma's two exact factors do (and gives 0 or inf past the range as they do), in
// one instruction where they take nine. fnmadd(kf, a, c) is exp_fma's fma(-kf, a, c) bit for
// bit (the negation is exact). Lanes in [kLowest, kHighest] need no clamp, since clamping
// leaves them as they are; one fixupimm gives every other lane what exp_fma gives it: +inf
// above the range, +0 below it, and x + x (x quieted) for a NaN. Two compares and the fixupimm
// replace the clamp's two instructions and the NaN test and add, and every one of the 2^32
// inputs gives the clamped form's bits (checked once by hand; tests/test_ort_numerics.py
// checks samples). SoftMarginLossBackward's body in L1 runs faster than with the clamp
// (docs/benchmarks.md, "The figures behind the kernels' choices"). Not kept: a branch to the
// clamped form where a lane is out of range (faster while no lane leaves the range, slower
// once a few lanes per vector do, as the -inf log of a zero probability does), and
// AVX512-DQ's vrangeps clamp (a quiet NaN comes out as +104 or -104, other bits).
inline __m512 exp_fma16(__m512 x) {
  using R = ExpReduction;
  const __mmask16 above_lowest = _mm512_cmp_ps_mask(x, _mm512_set1_ps(R::kLowest), _CMP_GE_OQ);
  const __mmask16 in_range =
      _mm512_mask_cmp_ps_mask(above_lowest, x, _mm512_set1_ps(R::kHighest), _CMP_LE_OQ);
  const __m512 round = _mm512_set1_ps(R::kRound);
  const __m512 kf = fused(x, _mm512_set1_ps(R::kLog2e), round) - round;
  const __m512 r1 = _mm512_fnmadd_ps(kf, _mm512_set1_ps(R::kLn2Hi), x);
  const __m512 r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(R::kLn2Lo), r1);
  const __m512 e = _mm512_scalef_ps(exp_polynomial(r), kf);
  // Per class of x, nibble by nibble from the lowest: QNaN and SNaN -> x quieted (2), 0 and +1
  // (always in range) -> e (0), -inf -> +0 (8), +inf -> +inf (5), negative -> +0 (8),
  // positive -> +inf (5).
  return _mm512_mask_fixupimm_ps(e, static_cast<__mmask16>(~in_range), x,
                                 _mm512_set1_epi32(0x58580022), 0);
}
#endif
#endif

}  // namespace lossgrad

#if defined(LOSSGRAD_VECTOR_LOG)
// g++'s vectoriser calls a function declared `simd` through its vector variants (the x86
// vector function ABI: b/c/d/e = SSE/AVX/AVX2/AVX-512, named _ZGV<isa>N<lanes>v_<symbol>).
// The declarations' symbols are lossgrad_logf_scalar and lossgrad_expf_scalar, defined below
// as the scalar forms; the variants are log_fma16 and exp_fma16, on 16 lanes or fewer. The
// calls must stay unconditional for the vectoriser, hence -fno-tree-sink and
// -fno-thread-jumps in the library's flags (build.py).
#define LOSSGRAD_VECTOR_VARIANTS(NAME, SCALAR, VECTOR)                                   \
  __attribute__((simd("notinbranch"), const, nothrow)) float NAME(float);               \
  float NAME(float x) __asm__(#NAME "_scalar");                                          \
  float NAME##_scalar(float x) { return SCALAR(x); }                                     \
  __m512 _ZGVeN16v_##NAME##_scalar(__m512 x) { return VECTOR(x); }                       \
  __m256 _ZGVdN8v_##NAME##_scalar(__m256 x) {                                            \
    return _mm512_castps512_ps256(VECTOR(_mm512_castps256_ps512(x)));                    \
  }                                                                                      \
  __m256 _ZGVcN8v_##NAME##_scalar(__m256 x) {                                            \
    return _mm512_castps512_ps256(VECTOR(_mm512_castps256_ps512(x)));                    \
  }                                                                                      \
  __m128 _ZGVbN4v_##NAME##_scalar(__m128 x) {                                            \
    return _mm512_castps512_ps128(VECTOR(_mm512_castps128_ps512(x)));                    \
  }
extern "C" {
LOSSGRAD_VECTOR_VARIANTS(lossgrad_logf, lossgrad::log_fma, lossgrad::log_fma16)
LOSSGRAD_VECTOR_VARIANTS(lossgrad_expf, lossgrad::exp_fma, lossgrad::exp_fma16)
}
#undef LOSSGRAD_VECTOR_VARIANTS
#endif

namespace lossgrad {

#if defined(LOSSGRAD_VECTOR_LOG)
inline float log(float x) { return lossgrad_logf(x); }
#elif defined(__FMA__)
inline float log(float x) { return log_fma(x); }
#else
// Without FMA (std::fma would be a libm call per operation): fdlibm's form, in s = f/(2+f).
inline float log(float x) {
  using namespace log_coefficients;
  const auto [f, kf] = reduce_for_log(x);
  const float s = f / (2.0f + f);
  const float z = s * s;
  const float w = z * z;
  const float series = z * (kF1 + w * kF3) + w * (kF2 + w * kF4);
  const float half_f2 = 0.5f * f * f;
  const float finite = kf * kFLn2Hi - ((half_f2 - (s * (half_f2 + series) + kf * kFLn2Lo)) - f);
  return log_special(x, finite);
}
#endif

inline double log(double x) {
  using namespace log_coefficients;
  const bool subnormal = x < std::numeric_limits<double>::min();
  const double scaled = subnormal ? x * 0x1p54 : x;
  constexpr uint64_t kHalfSqrt2 = 0x3fe6a09e00000000u;  // sqrt(2)/2, low word dropped
  const uint64_t shifted = bits_of(scaled) - kHalfSqrt2;
  // k = exponent of the shifted bits, as a double, without an int64 -> double conversion
  // (AVX2 has none): 2^52 + 2048 + k has k in its low bits.
  const uint64_t biased = (shifted >> 52) + (subnormal ? 2048 - 54 : 2048) - 4096 * (shifted >> 63);
  const double k = double_of(0x4330000000000000u | biased) - (0x1p52 + 2048.0);
  const double m = double_of((shifted & 0x000fffffffffffffu) + kHalfSqrt2);
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double w = z * z;
  const double series =
      z * (kD1 + w * (kD3 + w * (kD5 + w * kD7))) + w * (kD2 + w * (kD4 + w * kD6));
  const double half_f2 = 0.5 * f * f;
  const double finite = k * kDLn2Hi - ((half_f2 - (s * (half_f2 + series) + k * kDLn2Lo)) - f);
  return log_special(x, finite);
}

#if !defined(__FMA__)
// Without FMA (std::fma would be a libm call per operation): exp_fma's reduction and series,
// each a*b+c two roundings.

inline float exp(float x) {
  using R = ExpReduction;
  const float clamped = std::min(std::max(x, R::kLowest), R::kHighest);
  const float kf = (clamped * R::kLog2e + R::kRound) - R::kRound;
  const float r = (clamped - kf * R::kLn2Hi) - kf * R::kLn2Lo;
  // Taylor series to r^7 (truncation error < 0.13 ulp for |r| <= ln2/2), summed as
  // 1 + (r + r^2 q(r)) so that only the last addition rounds at the scale of the result.
  float q = 1.0f / 5040.0f;
  q = q * r + 1.0f / 720.0f;
  q = q * r + 1.0f / 120.0f;
  q = q * r + 1.0f / 24.0f;
  q = q * r + 1.0f / 6.0f;
  q = q * r + 0.5f;
  return scale_exp(x, 1.0f + (r + (r * r) * q), kf);
}
#elif defined(LOSSGRAD_VECTOR_LOG)
inline float exp(float x) { return lossgrad_expf(x); }
#else
inline float exp(float x) { return exp_fma(x); }
#endif

#if defined(LOSSGRAD_VECTOR_LOG)
// 16 floats as one value, for the bodies printed over any lane type (kLanes16): the
// arithmetic, comparison and ?: operators of g++'s vector extension act lane by lane as on a
// float (a comparison gives -1 or 0 per lane, and ?: selects on it), and log and exp are the
// vector variants inline. The iteration runs such a body on 16 elements at a time without
// the vectoriser's call to a variant per step (cxx/iteration.h's value_loop).
typedef float floatx16 __attribute__((vector_size(64)));
inline floatx16 log(floatx16 x) {
  return reinterpret_cast<floatx16>(log_fma16(reinterpret_cast<__m512>(x)));
}
inline floatx16 exp(floatx16 x) {
  return reinterpret_cast<floatx16>(exp_fma16(reinterpret_cast<__m512>(x)));
}
#endif
#if defined(LOSSGRAD_LANES8)
inline floatx8 log(floatx8 x) { return log_fma8(x); }
inline floatx8 exp(floatx8 x) { return exp_fma8(x); }
#endif

inline double exp(double x) {
  const double clamped = std::min(std::max(x, -746.0), 710.0);
  constexpr double kRound = 0x1.8p52;
  const double kd = (clamped * 1.4426950408889634074 + kRound) - kRound;
  const double r = (clamped - kd * 6.93147180369123816490e-01) - kd * 1.90821492927058770002e-10;
  // Taylor series to r^13 (truncation error < 0.02 ulp for |r| <= ln2/2), summed as above.
  double q = 1.0 / 6227020800.0;
  q = q * r + 1.0 / 479001600.0;
  q = q * r + 1.0 / 39916800.0;
  q = q * r + 1.0 / 3628800.0;
  q = q * r + 1.0 / 362880.0;
  q = q * r + 1.0 / 40320.0;
  q = q * r + 1.0 / 5040.0;
  q = q * r + 1.0 / 720.0;
  q = q * r + 1.0 / 120.0;
  q = q * r + 1.0 / 24.0;
  q = q * r + 1.0 / 6.0;
  q = q * r + 0.5;
  const double p = 1.0 + (r + (r * r) * q);
  // k + 2048 from the rounding constant's mantissa (2^51 + k), split into two halves k1 + k2
  // kept biased: AVX2 has neither a double -> int64 conversion nor a signed 64-bit shift.
  const uint64_t k_biased =
      (bits_of(kd + kRound) & 0x000fffffffffffffu) - (uint64_t{1} << 51) + 2048;
  const uint64_t k1_biased = k_biased >> 1;         // k1 + 1024
  const uint64_t k2_biased = k_biased - k1_biased;  // k2 + 1024
  const double e = p * double_of((k1_biased - 1) << 52) * double_of((k2_biased - 1) << 52);
  return x != x ? x + x : e;
}

// 1/d when d is a power of two whose reciprocal is a finite value of T, else 0. Then
// x * (1/d) and x / d are the same correctly rounded value of the same real number for every
// x (zeros, subnormals, infinities and NaN included), so a kernel may multiply instead of
// dividing by a run-time divisor such as beta; any other divisor keeps the division.
template <class T>
inline T exact_reciprocal(T d) {
  if (!(d > T(0)) || !std::isfinite(d)) return T(0);
  int exponent = 0;
  if (std::frexp(d, &exponent) != T(0.5)) return T(0);
  const T r = T(1) / d;
  return std::isfinite(r) && r * d == T(1) ? r : T(0);
}

}  // namespace lossgrad
