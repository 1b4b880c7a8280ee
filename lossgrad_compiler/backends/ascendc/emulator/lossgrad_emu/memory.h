// lossgrad_compiler Ascend C CPU emulation: UB, TPipe, TQue, TBuf, LocalTensor, GlobalTensor.
//
// The unified buffer of the running core is one byte array, filled with 0xFF (a NaN in
// every float type) when the kernel's TPipe is created, so reads of data nobody wrote show
// up as NaN. Buffers are handed out by InitBuffer like the real TPipe: a bump pointer from
// the start of UB, each buffer rounded up to 32 bytes. Queue buffers follow the state
// machine FREE -AllocTensor-> OCCUPIED -EnQue-> ENQUE -DeQue-> DEQUE -FreeTensor-> FREE.
// The checks are out-of-line functions (runtime.cpp); the templates only move data.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "lossgrad_emu/core.h"
#include "lossgrad_emu/cost.h"
#include "lossgrad_emu/float16.h"

namespace AscendC {

enum class TPosition : uint8_t { GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC };
using QuePosition = TPosition;

inline int64_t GetBlockIdx() { return lossgrad_emu::state().block_idx; }
inline int64_t GetBlockNum() { return lossgrad_emu::state().block_num; }

// The hard barrier of all the launch's vector cores.
template <bool isAIVOnly = true>
inline void SyncAll() {
  lossgrad_emu::SyncAllCores();
}

}  // namespace AscendC

namespace lossgrad_emu {

constexpr uint32_t kUbAlign = 32;
constexpr uint32_t kMaxBuffers = 64;
constexpr uint32_t kMaxQueueBuffersPerPosition = 8;

enum class BufState { Free, Occupied, Enqueued, Dequeued, Calc };

const char* StateName(BufState s);

struct Buffer {
  uint32_t offset = 0;  // bytes from the UB base
  uint32_t bytes = 0;
  BufState state = BufState::Free;
  std::string owner;  // "VECIN queue #0 buffer 1", "TBuf #2"
};

class Ub {
 public:
  static Ub& current();
  void Reset(uint64_t capacity);
  uint8_t* base() { return data_.data(); }
  uint64_t capacity() const { return data_.size(); }
  uint64_t used() const { return used_; }
  bool active() const { return active_; }
  void set_active(bool a) { active_ = a; }
  std::vector<std::unique_ptr<Buffer>>& buffers() { return buffers_; }
  // InitBuffer's bump allocation, with the CPU-debug checks of the real TPipe.
  Buffer* Allocate(const char* instruction, uint32_t len, const std::string& owner, bool vecin, bool queue);

 private:
  std::vector<uint8_t> data_;
  uint64_t used_ = 0;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  uint32_t queue_buffers_[2] = {0, 0};
  bool active_ = false;
};

// A LocalTensor operand: the buffer exists and may be used now (not FREE, not ENQUE), and
// bytes [byte_offset, end) are inside it; for instruction operands also 32-byte aligned.
void CheckLocal(const char* instruction, const Buffer* buffer, uint32_t byte_offset, uint64_t end, bool aligned);
// A GlobalTensor access: inside SetGlobalBuffer's size (when given) and a device allocation.
void CheckGlobal(const char* instruction, bool sized, uint64_t size, uint64_t begin, uint64_t count,
                 const void* address, uint64_t bytes);
void CheckSubTensor(uint32_t offset, uint32_t count);
// The end-of-kernel check: every queue buffer is free again.
void CheckAllFreed();
void CheckPipeUnique();

// The state machine of one TQue (element-type independent).
class QueueState {
 public:
  QueueState(const char* position, int32_t depth) : position_(position), depth_(depth) {}
  Buffer* Alloc();
  void Enque(const Buffer* b);
  Buffer* Deque();
  void Free(const Buffer* b);
  void Attach(std::vector<Buffer*> buffers, uint32_t bytes);
  uint32_t bytes() const { return bytes_; }

 private:
  Buffer* Own(const char* instruction, const Buffer* b) const;
  void Ready(const char* instruction) const;
  const char* position_;
  int32_t depth_;
  std::vector<Buffer*> buffers_;
  std::deque<Buffer*> queued_;
  uint32_t bytes_ = 0;
  size_t next_ = 0;
};

}  // namespace lossgrad_emu

namespace AscendC {

template <typename T>
class LocalTensor {
 public:
  LocalTensor() = default;
  LocalTensor(lossgrad_emu::Buffer* buffer, uint32_t byte_offset, uint32_t count)
      : buffer_(buffer), byte_offset_(byte_offset), count_(count) {}

  LocalTensor operator[](uint32_t offset) const {
    lossgrad_emu::CheckSubTensor(offset, count_);
    return LocalTensor(buffer_, byte_offset_ + offset * static_cast<uint32_t>(sizeof(T)), count_ - offset);
  }
  T GetValue(uint32_t i) const {
    T v;
    std::memcpy(&v, Ptr("LocalTensor::GetValue", i, 1, false) + i, sizeof(T));
    lossgrad_emu::CountUbScalar();
    return v;
  }
  void SetValue(uint32_t i, T v) const {
    std::memcpy(Ptr("LocalTensor::SetValue", i, 1, false) + i, &v, sizeof(T));
    lossgrad_emu::CountUbScalar();
  }
  uint32_t GetSize() const { return count_; }
  template <typename U>
  LocalTensor<U> ReinterpretCast() const {
    return LocalTensor<U>(buffer_, byte_offset_, static_cast<uint32_t>(count_ * sizeof(T) / sizeof(U)));
  }

  // The emulator's view: the element pointer after checking `count` elements from the start.
  T* Data(const char* instruction, uint64_t count, bool aligned = true) const {
    return Ptr(instruction, 0, count, aligned);
  }
  uint32_t byte_offset() const { return byte_offset_; }
  lossgrad_emu::Buffer* buffer() const { return buffer_; }

 private:
  T* Ptr(const char* instruction, uint64_t first, uint64_t count, bool aligned) const {
    lossgrad_emu::CheckLocal(instruction, buffer_, byte_offset_, byte_offset_ + (first + count) * sizeof(T), aligned);
    return reinterpret_cast<T*>(lossgrad_emu::Ub::current().base() + byte_offset_);
  }

  lossgrad_emu::Buffer* buffer_ = nullptr;
  uint32_t byte_offset_ = 0;
  uint32_t count_ = 0;
};

template <TPosition POS, int32_t DEPTH>
class TQue {
 public:
  TQue() : state_(POS == TPosition::VECIN ? "VECIN" : "VECOUT", DEPTH) {}
  template <typename T>
  LocalTensor<T> AllocTensor() {
    return Whole<T>(state_.Alloc());
  }
  template <typename T>
  bool EnQue(const LocalTensor<T>& tensor) {
    state_.Enque(tensor.buffer());
    return true;
  }
  template <typename T>
  LocalTensor<T> DeQue() {
    return Whole<T>(state_.Deque());
  }
  template <typename T>
  void FreeTensor(LocalTensor<T>& tensor) {
    state_.Free(tensor.buffer());
  }
  lossgrad_emu::QueueState& state() { return state_; }

 private:
  template <typename T>
  LocalTensor<T> Whole(lossgrad_emu::Buffer* b) {
    return LocalTensor<T>(b, b->offset, state_.bytes() / static_cast<uint32_t>(sizeof(T)));
  }
  lossgrad_emu::QueueState state_;
};

template <TPosition POS = TPosition::VECCALC>
class TBuf {
 public:
  template <typename T>
  LocalTensor<T> Get() const {
    if (buffer_ == nullptr) lossgrad_emu::Violation("TBuf::Get", "the TBuf has no buffer (InitBuffer first)");
    return LocalTensor<T>(buffer_, buffer_->offset, bytes_ / static_cast<uint32_t>(sizeof(T)));
  }
  template <typename T>
  LocalTensor<T> Get(uint32_t len) const {
    if (buffer_ == nullptr || static_cast<uint64_t>(len) * sizeof(T) > bytes_) {
      lossgrad_emu::Violation("TBuf::Get", "the requested length does not fit the buffer");
    }
    return LocalTensor<T>(buffer_, buffer_->offset, len);
  }
  void Attach(lossgrad_emu::Buffer* buffer, uint32_t bytes) {
    buffer_ = buffer;
    bytes_ = bytes;
  }

 private:
  lossgrad_emu::Buffer* buffer_ = nullptr;
  uint32_t bytes_ = 0;
};

// One per kernel. Its destructor is the end of the kernel: every queue buffer must be free.
class TPipe {
 public:
  TPipe() { lossgrad_emu::CheckPipeUnique(); }
  ~TPipe() { lossgrad_emu::CheckAllFreed(); }
  TPipe(const TPipe&) = delete;
  TPipe& operator=(const TPipe&) = delete;

  template <TPosition POS, int32_t DEPTH>
  bool InitBuffer(TQue<POS, DEPTH>& que, uint8_t num, uint32_t len) {
    static_assert(POS == TPosition::VECIN || POS == TPosition::VECOUT, "vector kernels queue at VECIN/VECOUT");
    if (num < 1 || num > lossgrad_emu::kMaxBuffers) {
      lossgrad_emu::Violation("InitBuffer", "the buffer count is outside [1, 64]");
    }
    std::vector<lossgrad_emu::Buffer*> buffers;
    const int id = queues_++;
    for (uint8_t k = 0; k < num; ++k) {
      const std::string owner = std::string(POS == TPosition::VECIN ? "VECIN" : "VECOUT") + " queue #" +
                                std::to_string(id) + " buffer " + std::to_string(k);
      buffers.push_back(lossgrad_emu::Ub::current().Allocate("InitBuffer", len, owner, POS == TPosition::VECIN, true));
    }
    que.state().Attach(std::move(buffers), (len + 31) / 32 * 32);
    return true;
  }
  template <TPosition POS>
  bool InitBuffer(TBuf<POS>& buf, uint32_t len) {
    const std::string owner = "TBuf #" + std::to_string(tbufs_++);
    buf.Attach(lossgrad_emu::Ub::current().Allocate("InitBuffer", len, owner, false, false), (len + 31) / 32 * 32);
    return true;
  }

 private:
  int queues_ = 0;
  int tbufs_ = 0;
};

template <typename T>
class GlobalTensor {
 public:
  void SetGlobalBuffer(T* buffer, uint64_t size) {
    origin_ = buffer;
    size_ = size;
    sized_ = true;
  }
  void SetGlobalBuffer(T* buffer) {
    origin_ = buffer;
    size_ = 0;
    sized_ = false;
  }
  GlobalTensor operator[](uint64_t offset) const {
    GlobalTensor g = *this;
    g.offset_ += offset;
    return g;
  }
  T GetValue(uint64_t i) const {
    T v;
    std::memcpy(&v, Data("GlobalTensor::GetValue", i, 1), sizeof(T));
    lossgrad_emu::CountGmScalar(sizeof(T));
    return v;
  }
  void SetValue(uint64_t i, T v) {
    std::memcpy(Data("GlobalTensor::SetValue", i, 1), &v, sizeof(T));
    lossgrad_emu::CountGmScalar(sizeof(T));
  }
  uint64_t GetSize() const { return size_; }

  // Element pointer after checking [first, first+count) against SetGlobalBuffer's size and
  // against the device allocation.
  T* Data(const char* instruction, uint64_t first, uint64_t count) const {
    if (origin_ == nullptr) lossgrad_emu::Violation(instruction, "GlobalTensor has no buffer");
    T* p = origin_ + offset_ + first;
    lossgrad_emu::CheckGlobal(instruction, sized_, size_, offset_ + first, count, p, count * sizeof(T));
    return p;
  }

 private:
  T* origin_ = nullptr;
  uint64_t offset_ = 0;
  uint64_t size_ = 0;
  bool sized_ = false;
};

}  // namespace AscendC

namespace AscendC {

// The scalar unit's data cache: a GM value written with SetValue reaches other cores only
// after a clean, and a core sees their values only after an invalidate. The emulation has
// no cache (GM is coherent); the call is accepted where the hardware needs it.
enum class CacheLine : uint8_t { SINGLE_CACHE_LINE = 0, ENTIRE_DATA_CACHE = 1 };
enum class DcciDst : uint8_t { CACHELINE_ALL = 0, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };
template <typename T, CacheLine entireType, DcciDst dcciDst>
void DataCacheCleanAndInvalid(const GlobalTensor<T>& dst) {
  (void)dst;
}
}  // namespace AscendC
