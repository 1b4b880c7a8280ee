// lossgrad_compiler Ascend C CPU emulation: the ACL runtime subset a host program uses.
//
// Device memory is host memory registered with the emulator (so kernels' accesses can be
// checked); streams and devices are no-ops. aclCreateTensor describes a contiguous ND tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <vector>

#include "lossgrad_emu/core.h"

typedef enum {
  ACL_DT_UNDEFINED = -1,
  ACL_FLOAT = 0,
  ACL_FLOAT16 = 1,
  ACL_INT8 = 2,
  ACL_INT32 = 3,
  ACL_UINT8 = 4,
  ACL_INT16 = 6,
  ACL_UINT16 = 7,
  ACL_UINT32 = 8,
  ACL_INT64 = 9,
  ACL_UINT64 = 10,
  ACL_DOUBLE = 11,
  ACL_BOOL = 12,
  ACL_STRING = 13,
  ACL_COMPLEX64 = 16,
  ACL_COMPLEX128 = 17,
  ACL_BF16 = 27,
} aclDataType;

typedef enum { ACL_FORMAT_UNDEFINED = -1, ACL_FORMAT_NCHW = 0, ACL_FORMAT_NHWC = 1, ACL_FORMAT_ND = 2 } aclFormat;
typedef enum { ACL_MEM_MALLOC_HUGE_FIRST = 0, ACL_MEM_MALLOC_HUGE_ONLY = 1, ACL_MEM_MALLOC_NORMAL_ONLY = 2 } aclrtMemMallocPolicy;
typedef enum { ACL_MEMCPY_HOST_TO_HOST = 0, ACL_MEMCPY_HOST_TO_DEVICE = 1, ACL_MEMCPY_DEVICE_TO_HOST = 2, ACL_MEMCPY_DEVICE_TO_DEVICE = 3 } aclrtMemcpyKind;
typedef int aclError;
typedef void* aclrtStream;
constexpr aclError ACL_SUCCESS = 0;

inline aclError aclInit(const char*) { return ACL_SUCCESS; }
inline aclError aclrtSetDevice(int32_t) { return ACL_SUCCESS; }
inline aclError aclrtCreateStream(aclrtStream* stream) { *stream = nullptr; return ACL_SUCCESS; }
inline aclError aclrtSynchronizeStream(aclrtStream) { return ACL_SUCCESS; }

inline aclError aclrtMalloc(void** ptr, size_t size, aclrtMemMallocPolicy) {
  *ptr = lossgrad_emu::GmAlloc(size);
  return ACL_SUCCESS;
}
inline aclError aclrtFree(void* ptr) {
  lossgrad_emu::GmFree(ptr);
  return ACL_SUCCESS;
}
inline aclError aclrtMemcpy(void* dst, size_t dst_max, const void* src, size_t count, aclrtMemcpyKind) {
  if (count > dst_max) return 1;
  std::memcpy(dst, src, count);
  return ACL_SUCCESS;
}

inline size_t aclDataTypeSize(aclDataType t) {
  switch (t) {
    case ACL_INT8: case ACL_UINT8: case ACL_BOOL: return 1;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16: return 2;
    case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: return 4;
    case ACL_DOUBLE: case ACL_INT64: case ACL_UINT64: case ACL_COMPLEX64: return 8;
    case ACL_COMPLEX128: return 16;
    default: return 0;
  }
}

namespace op {
enum class DataType : int {
  DT_FLOAT = 0, DT_FLOAT16 = 1, DT_INT8 = 2, DT_INT32 = 3, DT_UINT8 = 4, DT_INT16 = 6,
  DT_UINT16 = 7, DT_UINT32 = 8, DT_INT64 = 9, DT_UINT64 = 10, DT_DOUBLE = 11, DT_BOOL = 12,
  DT_COMPLEX64 = 16, DT_COMPLEX128 = 17, DT_BF16 = 27,
};

// The dims of a tensor (CANN's op::Shape / gert::Shape).
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
  size_t GetDimNum() const { return dims_.size(); }
  int64_t GetDim(size_t i) const { return dims_.at(i); }
  void SetDim(size_t i, int64_t v) { dims_.at(i) = v; }
  void SetDimNum(size_t n) { dims_.resize(n, 1); }
  void AppendDim(int64_t v) { dims_.push_back(v); }
  int64_t GetShapeSize() const {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    return n;
  }
  const std::vector<int64_t>& dims() const { return dims_; }
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }

 private:
  std::vector<int64_t> dims_;
};
}  // namespace op

// A contiguous ND tensor in device memory.
struct aclTensor {
  std::vector<int64_t> view;
  aclDataType dtype = ACL_DT_UNDEFINED;
  void* data = nullptr;

  op::Shape GetViewShape() const { return op::Shape(view); }
  op::Shape GetStorageShape() const { return op::Shape(view); }
  op::DataType GetDataType() const { return static_cast<op::DataType>(dtype); }
  int64_t Numel() const { return GetViewShape().GetShapeSize(); }
  bool IsEmpty() const { return Numel() == 0; }
  void* GetData() const { return data; }
};

inline aclTensor* aclCreateTensor(const int64_t* view_dims, uint64_t view_dims_num, aclDataType data_type,
                                  const int64_t* /*stride*/, int64_t /*offset*/, aclFormat /*format*/,
                                  const int64_t* /*storage_dims*/, uint64_t /*storage_dims_num*/,
                                  void* tensor_data) {
  auto* t = new aclTensor;
  t->view.assign(view_dims, view_dims + view_dims_num);
  t->dtype = data_type;
  t->data = tensor_data;
  return t;
}
inline aclError aclDestroyTensor(const aclTensor* tensor) {
  delete tensor;
  return ACL_SUCCESS;
}
