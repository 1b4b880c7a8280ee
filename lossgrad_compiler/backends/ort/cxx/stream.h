// Streaming (non-temporal) stores for calls too large to stay in the last-level cache.
//
// An ordinary store first reads the line it writes (read for ownership), so a kernel that
// reads one tensor and writes one moves three tensors' bytes through memory. When a call's
// operands and result do not fit in the last-level cache the result would be evicted before
// anyone reads it anyway: writing it past the cache moves two tensors' bytes instead of three.
// Below that size the result stays cached for the next node, so ordinary stores are used.
// Streaming changes where bytes go, never what they are.

namespace lossgrad {

// The largest cache of CPU 0, in bytes, from Linux's sysfs; 32 MiB where that is unreadable.
// (glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) says 320 MiB for a 32 MiB L3 on some AMD guests.)
inline int64_t last_level_cache_bytes() {
  int64_t largest = 0;
  for (int index = 0; index < 8; ++index) {
    char path[64];
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    std::FILE* file = std::fopen(path, "r");
    if (file == nullptr) continue;
    long long value = 0;
    char unit = 0;
    if (std::fscanf(file, "%lld%c", &value, &unit) >= 1 && value > 0) {
      const int64_t scale = unit == 'K' ? int64_t{1} << 10 : unit == 'M' ? int64_t{1} << 20 : 1;
      largest = std::max<int64_t>(largest, value * scale);
    }
    std::fclose(file);
  }
  return largest > 0 ? largest : int64_t{32} << 20;
}

// Calls that move more bytes than this stream their result: half the last-level cache (glibc's
// memcpy streams from the same point: a copy of L3 / 4 bytes moves L3 / 2), or
// $LOSSGRAD_ORT_STREAM_ABOVE bytes (read once per process; tests set it to 0 to stream every
// call). Which kernels stream at all is iteration.h's kMayStream: a float or double result
// whose body has no exp or log, through a staged block (kStreams;
// variant_printer.streams_its_result says why), any float body the 16-lane loop runs, which
// stores its own vectors past the cache (kStreamsInLoop), and the fused half path, which
// stores whole lines of narrowed chunks (kStreamsFusedHalves).
//
// Ordinary stores pay off while a call's operands and result stay in the cache until the
// next node reads the result: the read for ownership and the write-back then cost nothing.
// benchmarks/bench_stream_threshold.py times a call and a chain of two nodes both ways, with
// the caches warm and flushed, at 1 and 2 threads: with an L3 shared with other cores,
// streaming mostly won where a call moved 3/4 of the L3, and ordinary stores mostly won at
// half of it and below, with 2 threads and the caches warm (docs/benchmarks.md, "Streaming
// threshold", has the table). The threshold was 7/8 of the cache while the half types
// streamed through the staged block, which lost time at 3/4; float32 calls moving more than
// the cache run faster streamed (docs/benchmarks.md, "The figures behind the kernels'
// choices").
inline int64_t stream_above_bytes() {
  static const int64_t bytes = [] {
    if (const char* configured = std::getenv("LOSSGRAD_ORT_STREAM_ABOVE")) {
      char* end = nullptr;
      const long long value = std::strtoll(configured, &end, 10);
      if (end != configured && *end == '\0' && value >= 0) return static_cast<int64_t>(value);
    }
    return last_level_cache_bytes() / 2;
  }();
  return bytes;
}

// Copies `bytes` from a cached block to `to` with non-temporal stores where the destination is
// 64-byte aligned (ordinary stores for the unaligned head and tail). The caller fences once
// with stream_fence() after its last streamed block, before the result is handed on.
inline void stream_copy(void* to, const void* from, int64_t bytes) {
  auto* dst = static_cast<char*>(to);
  const auto* src = static_cast<const char*>(from);
#if defined(__AVX512F__) || defined(__AVX__)
#if defined(__AVX512F__)
  constexpr int64_t kVector = 64;
#else
  constexpr int64_t kVector = 32;
#endif
  const int64_t head = std::min<int64_t>(
      bytes, static_cast<int64_t>((kVector - reinterpret_cast<uintptr_t>(dst) % kVector) % kVector));
  std::memcpy(dst, src, static_cast<size_t>(head));
  int64_t i = head;
  for (; i + kVector <= bytes; i += kVector) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i),
                        _mm512_loadu_si512(reinterpret_cast<const void*>(src + i)));
#else
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
#endif
  }
  std::memcpy(dst + i, src + i, static_cast<size_t>(bytes - i));
#else
  std::memcpy(dst, src, static_cast<size_t>(bytes));
#endif
}

inline void stream_fence() {
#if defined(__AVX512F__) || defined(__AVX__)
  _mm_sfence();
#endif
}

}  // namespace lossgrad
