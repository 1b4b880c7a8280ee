// Rank-generic iteration over numpy-broadcast operands: the loops that apply a printed
// level-2 body. Nothing here knows an operator; a variant (a struct printed from one level-2
// function) supplies the element types, the scalar body and, for sums over broadcast
// dimensions, the accumulator.
//
// Determinism: work is split over OUTPUT elements only, and each output element sums its
// inputs sequentially in row-major order of the iteration space, so the bits of a result do
// not depend on the split (and so not on the number of threads).

namespace lossgrad {

// The ins() of a generic: grad_output, self, target, then an operator's optional inputs that
// are present (weight, pos_weight). A variant declares all kNumOperands load types and uses;
// those past its own operands are never read (kUses false).
constexpr int kNumOperands = 5;

struct Shape {
  int rank = 0;
  int64_t dim[kMaxRank] = {};
  int64_t numel() const {
    int64_t n = 1;
    for (int a = 0; a < rank; ++a) n *= dim[a];
    return n;
  }
};

// The runtime shapes a printed count expression reads (tensor.dim generalised to run time).
struct Shapes {
  Shape operand[kNumOperands];
  // tensor.dim %operand, axis: the operand's own extent (axis counted from the left).
  uint64_t dim(int op, int axis) const { return static_cast<uint64_t>(operand[op].dim[axis]); }
  // The element count of the broadcast of the operands in `mask` (bit i = operand i).
  uint64_t broadcast_numel(unsigned mask) const {
    int rank = 0;
    for (int op = 0; op < kNumOperands; ++op)
      if (mask & (1u << op)) rank = std::max(rank, operand[op].rank);
    uint64_t n = 1;
    for (int a = 0; a < rank; ++a) {
      int64_t extent = 1;
      for (int op = 0; op < kNumOperands; ++op) {
        if (!(mask & (1u << op))) continue;
        const int j = a - (rank - operand[op].rank);
        if (j >= 0 && operand[op].dim[j] != 1) extent = operand[op].dim[j];
      }
      n *= static_cast<uint64_t>(extent);
    }
    return n;
  }
};

// Element strides of each operand over the iteration space; 0 where an operand is broadcast.
struct Layout {
  int rank = 0;
  int64_t dim[kMaxRank] = {};
  int64_t stride[kNumOperands][kMaxRank] = {};
  const void* data[kNumOperands] = {};
  Element element[kNumOperands] = {};
  void* out = nullptr;
};

inline Layout make_layout(const Shape& space, const Shapes& shapes, const void* const* data,
                          const Element* element, void* out) {
  Layout l;
  l.rank = space.rank;
  for (int a = 0; a < space.rank; ++a) l.dim[a] = space.dim[a];
  for (int op = 0; op < kNumOperands; ++op) {
    const Shape& s = shapes.operand[op];
    int64_t natural = 1;
    for (int j = s.rank - 1; j >= 0; --j) {
      const int a = j + (space.rank - s.rank);
      l.stride[op][a] = (s.dim[j] == 1) ? 0 : natural;
      natural *= s.dim[j];
    }
    l.data[op] = data[op];
    l.element[op] = element[op];
  }
  l.out = out;
  return l;
}

// Merge neighbouring axes that every operand walks with one stride, and drop axes of extent
// 1: an elementwise call on contiguous or scalar operands becomes a single rank-1 loop (the
// contiguous and scalar-grad_output fast paths).
inline void coalesce(Layout& l) {
  // In place: axis a is read before the merged axes (at most a of them) are written.
  int rank = 0;
  for (int a = 0; a < l.rank; ++a) {
    if (l.dim[a] == 1) continue;
    bool merge = rank > 0;
    for (int op = 0; merge && op < kNumOperands; ++op)
      merge = l.stride[op][rank - 1] == l.stride[op][a] * l.dim[a];
    const int to = merge ? rank - 1 : rank;
    l.dim[to] = merge ? l.dim[to] * l.dim[a] : l.dim[a];
    for (int op = 0; op < kNumOperands; ++op) l.stride[op][to] = l.stride[op][a];
    if (!merge) ++rank;
  }
  if (rank == 0) {  // a single element
    rank = 1;
    l.dim[0] = 1;
    for (int op = 0; op < kNumOperands; ++op) l.stride[op][0] = 0;
  }
  l.rank = rank;
}

#if defined(LOSSGRAD_VECTOR_LOG)
// 16 floats of an operand the body reads, from `from` (any alignment); zeros for one it does
// not read, which is never loaded (and may have another type). With kPlain the load is kept
// an instruction of its own (see value_lanes16).
template <bool kUses, bool kPlain, class T>
inline floatx16 lanes_of(const T* from) {
  floatx16 lanes = {};
  if constexpr (kUses) {
    static_assert(std::is_same_v<T, float>, "a body run on 16 lanes reads floats");
    std::memcpy(&lanes, from, sizeof lanes);
    if constexpr (kPlain) asm("" : "+v"(lanes));  // the value is in a register here
  }
  return lanes;
}

// The last `rest` (< 16) elements of an operand the body reads, copied into a zero-padded
// chunk; an operand it does not read is passed on unread.
template <bool kUses, class T>
inline const T* padded_tail(const T* from, int64_t rest, float* chunk) {
  if constexpr (kUses) {
    std::fill(chunk, chunk + 16, 0.0f);
    std::copy(from, from + rest, chunk);
    return chunk;
  } else {
    return from;
  }
}

// With kStream (a result larger than the cache, `out` on a 64-byte boundary) each vector is
// written with a non-temporal store, and each operand is loaded by an instruction of its own:
// left to itself, g++ folds a load into the masked multiply of a select (KlDivTargetBackward's
// grad_output), and at 2^22 with a full grad_output that operand's misses were not hidden
// (docs/benchmarks.md, "The figures behind the kernels' choices").
template <class V, bool kExact, bool kStream = false>
inline void value_lanes16(const typename V::L0* a, const typename V::L1* b,
                          const typename V::L2* c, const typename V::L3* d,
                          const typename V::L4* e, float* out, int64_t n,
                          const typename V::Params& p) {
  const auto value = [&p](const auto* s0, const auto* s1, const auto* s2, const auto* s3,
                          const auto* s4) {
    return V::template value<kExact>(
        lanes_of<V::kUses0, kStream>(s0), lanes_of<V::kUses1, kStream>(s1),
        lanes_of<V::kUses2, kStream>(s2), lanes_of<V::kUses3, kStream>(s3),
        lanes_of<V::kUses4, kStream>(s4), p);
  };
  const auto step = [&value](const auto* s0, const auto* s1, const auto* s2, const auto* s3,
                             const auto* s4, float* to) {
    const floatx16 v = value(s0, s1, s2, s3, s4);
    if constexpr (kStream)
      _mm512_stream_ps(to, reinterpret_cast<const __m512&>(v));
    else
      std::memcpy(to, &v, sizeof v);
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) step(a + i, b + i, c + i, d + i, e + i, out + i);
  if (i == n) return;
  const int64_t rest = n - i;
  float chunks[kNumOperands][16];
  float tail[16];
  const floatx16 v = value(padded_tail<V::kUses0>(a + i, rest, chunks[0]),
                           padded_tail<V::kUses1>(b + i, rest, chunks[1]),
                           padded_tail<V::kUses2>(c + i, rest, chunks[2]),
                           padded_tail<V::kUses3>(d + i, rest, chunks[3]),
                           padded_tail<V::kUses4>(e + i, rest, chunks[4]));
  std::memcpy(tail, &v, sizeof v);
  std::copy(tail, tail + rest, out + i);
}
#endif

// Whether value_loop runs V on 16 lanes for a result of type R: the one test both the loop's
// dispatch and kStreamsInLoop read, so that a block handed to the loop to stream is never
// written by the scalar fallback with ordinary stores.
template <class V, class R>
constexpr bool kRunsOn16Lanes =
#if defined(LOSSGRAD_VECTOR_LOG)
    V::kLanes16 && std::is_same_v<R, float>;
#else
    false;
#endif

// Values of one block: out[i] = V::value(a[i], b[i], c[i], d[i], e[i]), the body
// multiplying by its run-time divisors' reciprocals where every one of the call is exact
// (Params::exact()) and dividing otherwise: chosen once per call, so that no element
// computes both the product and the quotient. An operand the variant does not have is
// never read: its loads are dead once value() is inlined. Each loop is a function of its
// own: inlined side by side into one caller, g++'s partial redundancy elimination merged
// the two loops' common exp call out of the select and left one of them unvectorised
// (SoftMarginLossBackward with reduction=mean, many times slower; docs/benchmarks.md, "The
// figures behind the kernels' choices").
//
// A body printed over any lane type (kLanes16: float operands and float arithmetic only) runs
// on 16 elements at a time where the vector log and exp exist (AVX-512), the last partial
// step on zero-padded copies: the same operations in the same order on each lane, so the
// same bits as one element at a time, with the variants inline rather than called per step
// (docs/benchmarks.md, "The figures behind the kernels' choices").
template <class V, bool kExact, bool kStream, class R>
__attribute__((noinline)) void value_loop(
    const typename V::L0* __restrict a, const typename V::L1* __restrict b,
    const typename V::L2* __restrict c, const typename V::L3* __restrict d,
    const typename V::L4* __restrict e, R* __restrict out, int64_t n, const typename V::Params& p) {
  if constexpr (kRunsOn16Lanes<V, R>) {
#if defined(LOSSGRAD_VECTOR_LOG)
    value_lanes16<V, kExact, kStream>(a, b, c, d, e, out, n, p);
#endif
  } else {
    static_assert(!kStream, "only the 16-lane loop streams its own stores");
    for (int64_t i = 0; i < n; ++i)
      out[i] = V::template value<kExact>(a[i], b[i], c[i], d[i], e[i], p);
  }
}

template <class V, bool kStream = false, class R>
inline void value_block(const typename V::L0* __restrict a, const typename V::L1* __restrict b,
                        const typename V::L2* __restrict c, const typename V::L3* __restrict d,
                        const typename V::L4* __restrict e, R* __restrict out, int64_t n,
                        const typename V::Params& p) {
  if (p.exact())
    value_loop<V, true, kStream>(a, b, c, d, e, out, n, p);
  else
    value_loop<V, false, kStream>(a, b, c, d, e, out, n, p);
}

// One operand's block buffer. A broadcast operand (stride 0, e.g. a 0-d grad_output) is
// converted and replicated once and then reused by every block that reads the same element;
// only as many copies as a block reads are written (a call of 16 elements writes 16, not
// kBlock).
template <class C>
struct OperandBlock {
  C buf[kBlock];
  const void* replicated = nullptr;  // the element buf holds `copies` copies of, if any
  int64_t copies = 0;

  template <class T>
  const C* load(const T* p, int64_t stride, int64_t n) {
    if (stride != 0) {
      replicated = nullptr;
      return load_block<C>(p, stride, n, buf);
    }
    if (replicated != p || copies < n) {
      load_block<C>(p, 0, n, buf);
      replicated = p;
      copies = n;
    }
    return buf;
  }

  // The same for an operand whose storage type is known at run time. Only types that widen
  // exactly into C reach here (the glue admits no other), so a double is never read as float.
  const C* load(const void* data, Element element, int64_t offset, int64_t stride, int64_t n) {
    switch (element) {
      case Element::kFloat16: return load(static_cast<const float16*>(data) + offset, stride, n);
      case Element::kBFloat16: return load(static_cast<const bfloat16*>(data) + offset, stride, n);
      case Element::kFloat32: return load(static_cast<const float*>(data) + offset, stride, n);
      case Element::kFloat64:
        if constexpr (std::is_same_v<C, double>)
          return load(static_cast<const double*>(data) + offset, stride, n);
        break;
    }
    return nullptr;
  }
};

template <class V>
struct BlockLoads {
  OperandBlock<typename V::L0> b0;
  OperandBlock<typename V::L1> b1;
  OperandBlock<typename V::L2> b2;
  OperandBlock<typename V::L3> b3;
  OperandBlock<typename V::L4> b4;
  const typename V::L0* a0 = b0.buf;
  const typename V::L1* a1 = b1.buf;
  const typename V::L2* a2 = b2.buf;
  const typename V::L3* a3 = b3.buf;
  const typename V::L4* a4 = b4.buf;
  // Operands the body never reads (KlDivBackward's self, an absent optional input) are not
  // loaded at all.
  void load(const Layout& l, const int64_t* offset, int inner_axis, int64_t n) {
    if constexpr (V::kUses0)
      a0 = b0.load(l.data[0], l.element[0], offset[0], l.stride[0][inner_axis], n);
    if constexpr (V::kUses1)
      a1 = b1.load(l.data[1], l.element[1], offset[1], l.stride[1][inner_axis], n);
    if constexpr (V::kUses2)
      a2 = b2.load(l.data[2], l.element[2], offset[2], l.stride[2][inner_axis], n);
    if constexpr (V::kUses3)
      a3 = b3.load(l.data[3], l.element[3], offset[3], l.stride[3][inner_axis], n);
    if constexpr (V::kUses4)
      a4 = b4.load(l.data[4], l.element[4], offset[4], l.stride[4][inner_axis], n);
  }
  template <bool kStream = false, class R>
  void values(R* out, int64_t n, const typename V::Params& p) const {
    value_block<V, kStream>(a0, a1, a2, a3, a4, out, n, p);
  }
};

// An operand the body never reads gets stride 0 everywhere, so it cannot block coalescing.
template <class V>
inline constexpr bool kUses[kNumOperands] = {V::kUses0, V::kUses1, V::kUses2, V::kUses3,
                                             V::kUses4};

template <class V>
inline void forget_unused(Layout& l) {
  const bool* uses = kUses<V>;
  for (int op = 0; op < kNumOperands; ++op)
    if (!uses[op])
      for (int a = 0; a < l.rank; ++a) l.stride[op][a] = 0;
}

// The fused path of half-type signatures. When the body computes in float, the result is a
// half type H and every operand the body reads is stored as H, contiguous or broadcast along
// the inner axis, each chunk of kChunk elements is widened, computed and narrowed in vector
// registers. The block path would write every operand and the values to an L1 buffer and
// read them back, and those stores, not memory, bound it (docs/benchmarks.md, "The figures
// behind the kernels' choices"). The values are the same: the same conversions and the same
// body, element by element.
template <class V>
constexpr bool kFusesHalves =
    std::is_same_v<typename V::Val, float> &&
    (std::is_same_v<typename V::Out, float16> || std::is_same_v<typename V::Out, bfloat16>);

template <class H>
constexpr Element kHalfElement = std::is_same_v<H, float16> ? Element::kFloat16
                                                             : Element::kBFloat16;

template <class V>
bool fuses_halves(const Layout& l) {
  if constexpr (!kFusesHalves<V>) {
    return false;
  } else {
    const bool* uses = kUses<V>;
    const int inner = l.rank - 1;
    for (int op = 0; op < kNumOperands; ++op)
      if (uses[op] && (l.element[op] != kHalfElement<typename V::Out> ||
                       (l.stride[op][inner] != 0 && l.stride[op][inner] != 1)))
        return false;
    return true;
  }
}

// One operand of the fused path: chunk i starts at data + (i & mask). A contiguous operand
// has mask -1; a broadcast one re-reads kChunk copies of its element (mask 0), so that the
// loop has no branch per operand.
template <class H>
struct HalfStream {
  const H* data = nullptr;
  int64_t mask = 0;
  H replicated[kChunk];
  const H* at(int64_t i) const { return data + (i & mask); }
  void start(const Layout& l, int op, int64_t offset, int inner) {
    const H* first = static_cast<const H*>(l.data[op]) + offset;
    if (l.stride[op][inner] == 0) {
      std::fill(std::begin(replicated), std::end(replicated), *first);
      data = replicated;
      mask = 0;
    } else {
      data = first;
      mask = -1;
    }
  }
};

// kConstantGo: grad_output is broadcast along the row (a 0-d grad_output, the common case of
// a reduced loss), so its chunk is widened once rather than in every step: converted again
// each time, it cost KlDivBackward float16 0-d more in cache than IREE's whole kernel
// (docs/benchmarks.md, "The figures behind the kernels' choices").
template <class V, bool kExact, bool kStream, bool kConstantGo>
__attribute__((noinline)) void fused_half_chunks(const HalfStream<typename V::Out>* in,
                                                 typename V::Out* out, int64_t n,
                                                 const typename V::Params& params) {
  using H = typename V::Out;
  // A local copy: the vector stores may alias anything, so a referenced parameter would be
  // reloaded (and its division test repeated) in every chunk.
  const typename V::Params p = params;
  alignas(64) typename V::L0 a[kChunk] = {};
  alignas(64) typename V::L1 b[kChunk] = {};
  alignas(64) typename V::L2 c[kChunk] = {};
  alignas(64) typename V::L3 d[kChunk] = {};
  alignas(64) typename V::L4 e[kChunk] = {};
  alignas(64) float values[2][kChunk];
  // The values of one chunk whose operands start at s0..s4 (kChunk elements each, read if
  // used), into `to`. With kConstantGo, grad_output's chunk is widened once, before the loop.
  const auto compute = [&](float* to, const H* s0, const H* s1, const H* s2, const H* s3,
                           const H* s4) {
    if constexpr (V::kUses0 && !kConstantGo) widen_chunk(s0, a);
    if constexpr (V::kUses1) widen_chunk(s1, b);
    if constexpr (V::kUses2) widen_chunk(s2, c);
    if constexpr (V::kUses3) widen_chunk(s3, d);
    if constexpr (V::kUses4) widen_chunk(s4, e);
#if defined(LOSSGRAD_VECTOR_LOG)
    if constexpr (V::kLanes16 && kChunk == 16) {  // one step of 16 lanes
      value_lanes16<V, kExact>(a, b, c, d, e, to, kChunk, p);
      return;
    }
#endif
    // Kept a loop: fully unrolled early, it is left to the SLP vectoriser, which scalarised
    // some bodies (KlDivBackward's scale product); the loop vectoriser makes one vector step.
#pragma GCC unroll 1
    for (int j = 0; j < kChunk; ++j)
      to[j] = V::template value<kExact>(a[j], b[j], c[j], d[j], e[j], p);
  };
  // in registers, not reloaded
  const HalfStream<H> s0 = in[0], s1 = in[1], s2 = in[2], s3 = in[3], s4 = in[4];
  if constexpr (V::kUses0 && kConstantGo) widen_chunk(s0.data, a);
  int64_t i = 0;
  // Two chunks a step, narrowed together (narrow_chunk_pair): for bfloat16 always, for float16
  // when they are streamed, so that each non-temporal store writes a whole line.
  if constexpr (std::is_same_v<H, bfloat16> || kStream) {
    for (; i + 2 * kChunk <= n; i += 2 * kChunk) {
      compute(values[0], s0.at(i), s1.at(i), s2.at(i), s3.at(i), s4.at(i));
      const int64_t j = i + kChunk;
      compute(values[1], s0.at(j), s1.at(j), s2.at(j), s3.at(j), s4.at(j));
      narrow_chunk_pair<kStream>(values[0], values[1], out + i);
    }
  }
  for (; i + kChunk <= n; i += kChunk) {
    compute(values[0], s0.at(i), s1.at(i), s2.at(i), s3.at(i), s4.at(i));
    narrow_chunk<kStream>(values[0], out + i);
  }
  if (i == n) return;
  // The last partial chunk: contiguous operands copied into zero-padded chunks.
  H padded[kNumOperands][kChunk] = {};
  const H* from[kNumOperands];
  for (int op = 0; op < kNumOperands; ++op) {
    from[op] = in[op].at(i);
    if (in[op].mask != 0) {
      std::copy(from[op], from[op] + (n - i), padded[op]);
      from[op] = padded[op];
    }
  }
  compute(values[0], from[0], from[1], from[2], from[3], from[4]);
  H tail[kChunk];
  narrow_chunk(values[0], tail);
  std::copy(tail, tail + (n - i), out + i);
}

template <class V, bool kStream = false>
void fused_half_block(const HalfStream<typename V::Out>* in, typename V::Out* out, int64_t n,
                      const typename V::Params& params) {
  if constexpr (V::kUses0) {
    if (in[0].mask == 0) {
      if (params.exact())
        fused_half_chunks<V, true, kStream, true>(in, out, n, params);
      else
        fused_half_chunks<V, false, kStream, true>(in, out, n, params);
      return;
    }
  }
  if (params.exact())
    fused_half_chunks<V, true, kStream, false>(in, out, n, params);
  else
    fused_half_chunks<V, false, kStream, false>(in, out, n, params);
}

// Whether the 16-lane loop writes a streamed result itself, with non-temporal vector stores:
// a float body and result. The staged path computes a block into an L1 buffer and then copies
// it out, so a phase that only reads memory alternates with one that only writes it; stored
// as they are computed, the same call takes less time. The bodies with exp or log stream too
// when they run here: the staging pass was what made streaming cost them time
// (docs/benchmarks.md, "The figures behind the kernels' choices").
template <class V>
constexpr bool kStreamsInLoop =
    kRunsOn16Lanes<V, typename V::Out> && std::is_same_v<typename V::Out, typename V::Val>;

// The same for the fused half path: with AVX-512 each pair of narrowed chunks, a whole 64-byte
// line, leaves with one non-temporal store (docs/benchmarks.md, "The figures behind the
// kernels' choices").
template <class V>
constexpr bool kStreamsFusedHalves =
#if defined(__AVX512F__)
    kFusesHalves<V>;
#else
    false;
#endif

template <class V>
constexpr bool kMayStream = V::kStreams || kStreamsInLoop<V> || kStreamsFusedHalves<V>;

#if defined(LOSSGRAD_VECTOR_LOG)
// One operand of a shifted row: contiguous floats (mask -1), or 16 copies of a value broadcast
// along the row, which every step re-reads (mask 0), as HalfStream does. An operand the body
// does not read stays at its zero copies.
struct RowFloats {
  alignas(64) float copies[16] = {};
  const float* data = copies;
  int64_t mask = 0;
  RowFloats() = default;
  RowFloats(const RowFloats&) = delete;
  RowFloats& operator=(const RowFloats&) = delete;
  const float* at(int64_t i) const { return data + (i & mask); }
};

// n results of a shifted row's operands from element i on, by value_lanes16 with plain loads:
// the row's head, which brings its operands to a line, and its tail (n < 16 both).
template <class V, bool kExact>
inline void plain_lanes16(const RowFloats* in, int64_t i, float* out, int64_t n,
                          const typename V::Params& p) {
  value_lanes16<V, kExact>(reinterpret_cast<const typename V::L0*>(in[0].at(i)),
                           reinterpret_cast<const typename V::L1*>(in[1].at(i)),
                           reinterpret_cast<const typename V::L2*>(in[2].at(i)),
                           reinterpret_cast<const typename V::L3*>(in[3].at(i)),
                           reinterpret_cast<const typename V::L4*>(in[4].at(i)), out, n, p);
}

// n results (n >= 16) of a row whose operands start on 64-byte lines (or are broadcast) and
// whose result `to` does not: each step reads whole lines, and the result's lines are put
// together from two steps' values with one permute, then streamed. The first line, which
// holds elements before `to`, is written through a mask; the last partial line and the tail
// with ordinary stores.
template <class V, bool kExact>
__attribute__((noinline)) void shifted_steps(const RowFloats* in, float* to, int64_t n,
                                             const typename V::Params& p) {
  const int q = static_cast<int>(reinterpret_cast<uintptr_t>(to) / sizeof(float) % 16);
  float* const line = to - q;  // result element j is line[j + q]
  // lane k of a line takes lane k + 16 - q of (the step before, this step)
  const __m512i index = _mm512_add_epi32(
      _mm512_set1_epi32(16 - q),
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const auto value = [&](int64_t i) {
    const floatx16 v = V::template value<kExact>(
        lanes_of<V::kUses0, true>(in[0].at(i)), lanes_of<V::kUses1, true>(in[1].at(i)),
        lanes_of<V::kUses2, true>(in[2].at(i)), lanes_of<V::kUses3, true>(in[3].at(i)),
        lanes_of<V::kUses4, true>(in[4].at(i)), p);
    return reinterpret_cast<const __m512&>(v);
  };
  __m512 previous = value(0);
  _mm512_mask_storeu_ps(line, static_cast<__mmask16>(0xffffu << q),
                        _mm512_permutex2var_ps(previous, index, previous));
  int64_t i = 16;
  for (; i + 16 <= n; i += 16) {
    const __m512 current = value(i);
    _mm512_stream_ps(line + i, _mm512_permutex2var_ps(previous, index, current));
    previous = current;
  }
  // Results [i - q, n): the last q lanes of the last step, then the partial step.
  const int64_t rest = n - i;
  alignas(64) float last[32];
  _mm512_store_ps(last, previous);
  plain_lanes16<V, kExact>(in, i, last + 16, rest, p);
  std::copy(last + 16 - q, last + 16 + rest, to + i - q);
}

// Operand op of a row from `offset` on, where the row reads it as contiguous float32 on a
// float boundary, as shifted and lined rows need it; nullptr where it does not.
inline const float* contiguous_floats(const Layout& l, int op, const int64_t* offset, int inner) {
  if (l.stride[op][inner] != 1 || l.element[op] != Element::kFloat32) return nullptr;
  const float* at = static_cast<const float*>(l.data[op]) + offset[op];
  return reinterpret_cast<uintptr_t>(at) % sizeof(float) == 0 ? at : nullptr;
}

// A streamed row of n elements of a float body whose contiguous operands (two or more) are
// float32 and share one offset within a 64-byte line other than the result's (`to`, on a line
// here), its other operands broadcast along the row: after a head of fewer than 16 elements
// that brings the operands to a line, shifted_steps computes the rest of the row. With the
// result on the lines instead, every load of such an operand spans two lines, and
// MseLossBackward float32 with a full grad_output took markedly longer with its result off
// its operands' lines than on them. A row with one contiguous operand lost little to its
// split loads and gained nothing shifted, so it stays with the blocks (docs/benchmarks.md,
// "The figures behind the kernels' choices"). Returns false, writing nothing, for any other
// row; the blocks compute it as before.
template <class V>
bool shifted_row(const Layout& l, const int64_t* offset, int inner, float* to, int64_t n,
                 const typename V::Params& p) {
  if (n < 64) return false;
  const bool* uses = kUses<V>;
  // Whether the row is one, decided before anything is copied.
  int64_t line_offset = -1;  // bytes into a line where the contiguous operands start
  int contiguous = 0;
  const float* from[kNumOperands] = {};  // where each contiguous operand's row starts
  for (int op = 0; op < kNumOperands; ++op) {
    if (!uses[op] || l.stride[op][inner] == 0) continue;
    from[op] = contiguous_floats(l, op, offset, inner);
    if (from[op] == nullptr) return false;
    const auto at_line = static_cast<int64_t>(reinterpret_cast<uintptr_t>(from[op]) % 64);
    if (line_offset >= 0 && at_line != line_offset) return false;
    line_offset = at_line;
    ++contiguous;
  }
  const auto result_offset = static_cast<int64_t>(reinterpret_cast<uintptr_t>(to) % 64);
  if (contiguous < 2 || line_offset <= 0 || line_offset == result_offset) return false;
  RowFloats in[kNumOperands];
  for (int op = 0; op < kNumOperands; ++op) {
    if (!uses[op]) continue;
    if (l.stride[op][inner] == 0) {
      // converted as the blocks convert it; a double (never the operand of a float body)
      // gives no copies
      OperandBlock<float> block;
      const float* copies = block.load(l.data[op], l.element[op], offset[op], 0, 16);
      if (copies == nullptr) return false;
      std::copy(copies, copies + 16, in[op].copies);
    } else {
      in[op].data = from[op];
      in[op].mask = -1;
    }
  }
  const int64_t head = (64 - line_offset) / int64_t{sizeof(float)};
  const auto compute = [&](auto exact) {
    constexpr bool kExact = decltype(exact)::value;
    plain_lanes16<V, kExact>(in, 0, to, head, p);
    for (RowFloats& operand : in)
      if (operand.mask != 0) operand.data += head;
    shifted_steps<V, kExact>(in, to + head, n - head, p);
  };
  if (p.exact())
    compute(std::true_type{});
  else
    compute(std::false_type{});
  return true;
}

// One operand of a lined row, read a whole 64-byte line at a time: each step loads the next
// line once and takes its 16 lanes from two lines with one permute, so no load spans two
// lines. The lines at the operand's ends are read through masks, so no element outside it is
// read.
class LineLanes {
 public:
  LineLanes() = default;
  LineLanes(const LineLanes&) = delete;
  LineLanes& operator=(const LineLanes&) = delete;

  // n contiguous floats from `from` (on a float boundary).
  void start(const float* from, int64_t n) {
    const int shift = static_cast<int>(reinterpret_cast<uintptr_t>(from) / sizeof(float) % 16);
    line_ = from - shift;
    end_ = n + shift;
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    index_ = _mm512_add_epi32(_mm512_set1_epi32(shift), lanes);
    current_ = _mm512_maskz_load_ps(in_bounds(0) & static_cast<__mmask16>(0xffffu << shift),
                                    line_);
  }

  // Lanes [i, i + 16) of the operand, i a multiple of 16, the steps in order. kWhole: the
  // next line lies inside the operand; else only its lanes inside it are read.
  template <bool kWhole>
  __m512 next(int64_t i) {
    const float* at = line_ + i + 16;
    __m512 following = kWhole ? _mm512_load_ps(at) : _mm512_maskz_load_ps(in_bounds(i + 16), at);
    asm("" : "+v"(following));  // a load of its own, as lanes_of's kPlain
    const __m512 lanes = _mm512_permutex2var_ps(current_, index_, following);
    current_ = following;
    return lanes;
  }

 private:
  // The lanes of the line at line_ + at (a multiple of 16) that hold elements of the operand.
  __mmask16 in_bounds(int64_t at) const {
    const int64_t inside = std::clamp<int64_t>(end_ - at, 0, 16);
    return static_cast<__mmask16>((uint32_t{1} << inside) - 1);
  }

  const float* line_ = nullptr;  // the line holding the operand's first element
  int64_t end_ = 0;              // one past the operand's last element, counted from line_
  __m512i index_{};              // lanes shift .. shift + 15 of (current_, the next line)
  __m512 current_{};
};

// n results (n >= 16) of a lined row into `to` (on a 64-byte line), streamed: whole steps
// while every operand's next line lies inside it, then the last steps with masked loads, the
// last partial step written with ordinary stores.
template <class V, bool kExact>
__attribute__((noinline)) void lined_steps(LineLanes* in, float* to, int64_t n,
                                           const typename V::Params& p) {
  const auto value = [&](auto whole, int64_t i) {
    constexpr bool kWhole = decltype(whole)::value;
    const auto lanes = [&](auto uses, int op) {
      floatx16 v = {};
      if constexpr (decltype(uses)::value) {
        const __m512 m = in[op].template next<kWhole>(i);
        std::memcpy(&v, &m, sizeof v);
      }
      return v;
    };
    const floatx16 v = V::template value<kExact>(
        lanes(std::bool_constant<V::kUses0>{}, 0), lanes(std::bool_constant<V::kUses1>{}, 1),
        lanes(std::bool_constant<V::kUses2>{}, 2), lanes(std::bool_constant<V::kUses3>{}, 3),
        lanes(std::bool_constant<V::kUses4>{}, 4), p);
    return reinterpret_cast<const __m512&>(v);
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 16) _mm512_stream_ps(to + i, value(std::true_type{}, i));
  for (; i < n; i += 16) {
    const __m512 v = value(std::false_type{}, i);
    if (i + 16 <= n) {
      _mm512_stream_ps(to + i, v);
    } else {
      alignas(64) float tail[16];
      _mm512_store_ps(tail, v);
      std::copy(tail, tail + (n - i), to + i);
    }
  }
}

// A streamed row of n elements of a float body without exp or log (V::kStreams) whose
// operands are all contiguous float32 (two or more), not all at the result's offset within a
// line, with `to` on a line, and that shifted_row does not take (their offsets differ from
// one another): lined_steps computes it in one pass, one permute per operand and step in
// place of loads that span two lines. numpy's arrays served from glibc's heap sit at any
// 16-byte offset: with grad_output, self, target and the result each 16 bytes past the one
// before, MseLossBackward float32 full took markedly longer than on lines, and about as long
// lined. A row with an operand broadcast along it (a 0-d grad_output) gained nothing lined,
// and bodies with exp or log lost more to the permutes than to the split loads: both stay
// with the blocks (docs/benchmarks.md, "The figures behind the kernels' choices"). Returns
// false, writing nothing, for any other row.
template <class V>
bool lined_row(const Layout& l, const int64_t* offset, int inner, float* to, int64_t n,
               const typename V::Params& p) {
  if constexpr (!V::kStreams) {
    return false;
  } else {
    if (n < 64) return false;
    const bool* uses = kUses<V>;
    int contiguous = 0;
    bool off_lines = false;
    const float* from[kNumOperands] = {};  // where each operand's row starts
    for (int op = 0; op < kNumOperands; ++op) {
      if (!uses[op]) continue;
      from[op] = contiguous_floats(l, op, offset, inner);
      if (from[op] == nullptr) return false;
      off_lines = off_lines || reinterpret_cast<uintptr_t>(from[op]) % 64 != 0;
      ++contiguous;
    }
    if (contiguous < 2 || !off_lines) return false;
    LineLanes in[kNumOperands];
    for (int op = 0; op < kNumOperands; ++op)
      if (uses[op]) in[op].start(from[op], n);
    if (p.exact())
      lined_steps<V, true>(in, to, n, p);
    else
      lined_steps<V, false>(in, to, n, p);
    return true;
  }
}
#endif

// Elementwise plan: output elements [begin, end) of the row-major iteration space.
template <class V>
void elementwise_range(const Layout& l, const typename V::Params& p, int64_t begin, int64_t end,
                       bool stream_requested) {
  using Out = typename V::Out;
  // Only kernels that may stream (kMayStream) keep the streaming code; the others compile
  // without it. A half-type result streams only where the fused path computes it.
  const bool fused = fuses_halves<V>(l);
  const bool stream = kMayStream<V> && stream_requested && (fused || !kFusesHalves<V>);
  using Val = typename V::Val;
  const int inner = l.rank - 1;
  int64_t idx[kMaxRank];
  int64_t rest = begin;
  for (int a = inner; a >= 0; --a) {
    idx[a] = rest % l.dim[a];
    rest /= l.dim[a];
  }
  const bool* uses = kUses<V>;
  HalfStream<Out> halves[kNumOperands];
  BlockLoads<V> in;
  Val values[kBlock];
  alignas(64) Out staged[kBlock];  // a streamed block is computed here, then streamed out
  // The first block ends where the result reaches a 64-byte boundary, so that the blocks
  // after it (kBlock elements, whole lines) write whole lines, and read them from operands
  // placed like the result. numpy's arrays start 16 bytes into a line: a line split by every
  // vector load and store made float32 cells at 2^24 slower than the same data 64-byte
  // aligned (docs/benchmarks.md, "The figures behind the kernels' choices").
  const int64_t lead = reinterpret_cast<uintptr_t>(static_cast<Out*>(l.out) + begin) % 64 /
                       int64_t{sizeof(Out)};
  int64_t first = lead == 0 ? kBlock : 64 / int64_t{sizeof(Out)} - lead;
  int64_t pos = begin;
  bool row_decided = false;  // whether shifted_row and lined_row have seen this row
  while (pos < end) {
    const int64_t row = std::min(l.dim[inner] - idx[inner], end - pos);  // left of the row
    int64_t n = std::min(row, first);
    first = kBlock;
    int64_t offset[kNumOperands] = {};
    for (int a = 0; a < l.rank; ++a)
      for (int op = 0; op < kNumOperands; ++op) offset[op] += idx[a] * l.stride[op][a];
    Out* const to = static_cast<Out*>(l.out) + pos;
    // A block the 16-lane loop or the fused half path streams itself (its destination on a
    // 64-byte boundary) needs no staging; any other streamed block is computed into `staged`
    // and copied out.
    const bool direct = (kStreamsInLoop<V> || kStreamsFusedHalves<V>) && stream &&
                        reinterpret_cast<uintptr_t>(to) % 64 == 0;
    // A row whose operands share an offset off the result's lines goes to shifted_row whole,
    // one whose operands sit at other offsets to lined_row. Both decide at the row's first
    // direct block: the blocks after it (whole lines) keep every operand's offset within a
    // line, so they would decide the same, and asked at every block of 1024 elements they
    // cost time (docs/benchmarks.md, "The figures behind the kernels' choices").
    bool row_written = false;  // by shifted_row or lined_row, whole
#if defined(LOSSGRAD_VECTOR_LOG)
    if constexpr (kStreamsInLoop<V>) {
      if (direct && !row_decided) {
        row_decided = true;
        row_written = shifted_row<V>(l, offset, inner, to, row, p) ||
                      lined_row<V>(l, offset, inner, to, row, p);
        if (row_written) n = row;
      }
    }
#endif
    Out* out = stream && !direct ? staged : to;
    if (row_written) {
      // nothing left of the row to compute
    } else if (fused) {
      if constexpr (kFusesHalves<V>) {
        for (int op = 0; op < kNumOperands; ++op)
          if (uses[op]) halves[op].start(l, op, offset[op], inner);
        if (direct)
          fused_half_block<V, kStreamsFusedHalves<V>>(halves, out, n, p);
        else
          fused_half_block<V>(halves, out, n, p);
      }
    } else {
      in.load(l, offset, inner, n);
      if constexpr (std::is_same_v<Out, Val>) {
        if constexpr (kStreamsInLoop<V>) {
          if (direct)
            in.template values<true>(out, n, p);
          else
            in.values(out, n, p);
        } else {
          in.values(out, n, p);
        }
      } else {
        in.values(values, n, p);
        store_block(out, values, n);
      }
    }
    if (stream && !direct) stream_copy(to, staged, n * int64_t{sizeof(Out)});
    pos += n;
    idx[inner] += n;
    if (idx[inner] == l.dim[inner]) row_decided = false;
    for (int a = inner; a > 0 && idx[a] == l.dim[a]; --a) {
      idx[a] = 0;
      ++idx[a - 1];
    }
  }
  if (stream) stream_fence();
}

// Reduce plan: the result has the shape of one operand (`follows`); every iteration axis that
// operand lacks or broadcasts is summed. Axes are split into parallel ones (the result's) and
// reduced ones, both kept in iteration order.
struct ReduceLayout {
  Layout l;
  int parallel[kMaxRank];
  int num_parallel = 0;
  int reduced[kMaxRank];
  int num_reduced = 0;
  int64_t reduced_count = 1;  // iteration points summed into one output element
};

inline ReduceLayout make_reduce_layout(const Layout& l, const Shape& result) {
  ReduceLayout r;
  r.l = l;
  const int lead = l.rank - result.rank;
  for (int a = 0; a < l.rank; ++a) {
    const bool kept = a >= lead && result.dim[a - lead] == l.dim[a];
    if (kept) {
      r.parallel[r.num_parallel++] = a;
    } else {
      r.reduced[r.num_reduced++] = a;
      r.reduced_count *= l.dim[a];
    }
  }
  return r;
}

template <class V>
inline void accumulate_vector(typename V::Val* __restrict acc, const typename V::Val* __restrict v,
                              int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = V::combine(acc[i], v[i]);
}

template <class V>
void reduce_range(const ReduceLayout& r, const typename V::Params& p, int64_t begin, int64_t end) {
  using Val = typename V::Val;
  using Out = typename V::Out;
  const Layout& l = r.l;
  const int inner = l.rank - 1;  // l.rank >= 1: a reduce plan sums over at least one axis
  for (int j = 0; j < r.num_reduced; ++j)
    if (l.dim[r.reduced[j]] == 0) {  // an empty sum: the accumulator's initial value
      const Val init = V::init();
      for (int64_t o = begin; o < end; ++o) static_cast<Out*>(l.out)[o] = convert<Out>(init);
      return;
    }
  const bool inner_parallel = r.num_parallel > 0 && r.parallel[r.num_parallel - 1] == inner;
  // Reduced axes walked by the outer loop; a reduced innermost axis is walked in blocks.
  const int outer_reduced = inner_parallel ? r.num_reduced : r.num_reduced - 1;
  int64_t pidx[kMaxRank];
  int64_t rest = begin;
  for (int j = r.num_parallel - 1; j >= 0; --j) {
    pidx[j] = rest % l.dim[r.parallel[j]];
    rest /= l.dim[r.parallel[j]];
  }
  BlockLoads<V> in;
  Val values[kBlock];
  Val acc[kBlock];
  int64_t o = begin;
  while (o < end) {
    int64_t base[kNumOperands] = {};
    for (int j = 0; j < r.num_parallel; ++j)
      for (int op = 0; op < kNumOperands; ++op) base[op] += pidx[j] * l.stride[op][r.parallel[j]];
    const int64_t n = inner_parallel
                          ? std::min({l.dim[inner] - pidx[r.num_parallel - 1], end - o, kBlock})
                          : 1;
    const Val init = V::init();
    for (int64_t i = 0; i < n; ++i) acc[i] = init;
    int64_t ridx[kMaxRank] = {};
    for (;;) {  // reduced points in row-major order of the iteration space
      int64_t offset[kNumOperands];
      for (int op = 0; op < kNumOperands; ++op) offset[op] = base[op];
      for (int j = 0; j < outer_reduced; ++j)
        for (int op = 0; op < kNumOperands; ++op)
          offset[op] += ridx[j] * l.stride[op][r.reduced[j]];
      if (inner_parallel) {
        in.load(l, offset, inner, n);
        in.values(values, n, p);
        accumulate_vector<V>(acc, values, n);
      } else {
        for (int64_t k = 0; k < l.dim[inner]; k += kBlock) {
          const int64_t m = std::min(kBlock, l.dim[inner] - k);
          int64_t at[kNumOperands];
          for (int op = 0; op < kNumOperands; ++op) at[op] = offset[op] + k * l.stride[op][inner];
          in.load(l, at, inner, m);
          in.values(values, m, p);
          Val s = acc[0];
          for (int64_t i = 0; i < m; ++i) s = V::combine(s, values[i]);
          acc[0] = s;
        }
      }
      int j = outer_reduced - 1;
      for (; j >= 0; --j) {
        if (++ridx[j] < l.dim[r.reduced[j]]) break;
        ridx[j] = 0;
      }
      if (j < 0) break;
    }
    store_block(static_cast<Out*>(l.out) + o, acc, n);
    o += n;
    for (int j = r.num_parallel - 1; j >= 0; --j) {
      pidx[j] += (j == r.num_parallel - 1) ? n : 1;
      if (pidx[j] < l.dim[r.parallel[j]] || j == 0) break;
      pidx[j] = 0;
    }
  }
}

}  // namespace lossgrad
