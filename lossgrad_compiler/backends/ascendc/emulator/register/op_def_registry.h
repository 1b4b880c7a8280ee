// lossgrad_compiler Ascend C CPU emulation: OpDef registration and the host tiling context.
//
// OP_ADD records an op's definition (inputs, outputs, attributes, tiling and infer
// functions) in a registry; the emulated launcher (lossgrad_emu/opapi.h) finds it by
// OpType, builds a TilingContext from the launch's tensors and attributes and calls the
// tiling function, as CANN's runtime does before a kernel launch.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "acl/acl.h"
#include "tiling/platform/platform_ascendc.h"

namespace ge {
enum DataType {
  DT_FLOAT = 0, DT_FLOAT16 = 1, DT_INT8 = 2, DT_INT32 = 3, DT_UINT8 = 4, DT_INT16 = 6,
  DT_UINT16 = 7, DT_UINT32 = 8, DT_INT64 = 9, DT_UINT64 = 10, DT_DOUBLE = 11, DT_BOOL = 12,
  DT_BF16 = 27,
};
enum Format { FORMAT_NCHW = 0, FORMAT_NHWC = 1, FORMAT_ND = 2 };
using graphStatus = uint32_t;
constexpr graphStatus GRAPH_SUCCESS = 0;
constexpr graphStatus GRAPH_FAILED = 0xFFFFFFFF;
}  // namespace ge

namespace gert {

using Shape = op::Shape;

class StorageShape {
 public:
  StorageShape() = default;
  explicit StorageShape(Shape s) : origin_(s), storage_(s) {}
  const Shape& GetOriginShape() const { return origin_; }
  const Shape& GetStorageShape() const { return storage_; }
  Shape& MutableStorageShape() { return storage_; }

 private:
  Shape origin_;
  Shape storage_;
};

class CompileTimeTensorDesc {
 public:
  explicit CompileTimeTensorDesc(ge::DataType t = ge::DT_FLOAT) : type_(t) {}
  ge::DataType GetDataType() const { return type_; }

 private:
  ge::DataType type_;
};

using AttrValue = std::variant<std::string, int64_t, bool, float>;

class RuntimeAttrs {
 public:
  explicit RuntimeAttrs(std::vector<AttrValue> values = {}) : values_(std::move(values)) {}
  template <typename T>
  const T* GetAttrPointer(size_t index) const {
    if (index >= values_.size()) return nullptr;
    return std::get_if<T>(&values_[index]);
  }
  const char* GetStr(size_t index) const {
    const auto* s = GetAttrPointer<std::string>(index);
    return s == nullptr ? nullptr : s->c_str();
  }
  const int64_t* GetInt(size_t index) const { return GetAttrPointer<int64_t>(index); }
  const float* GetFloat(size_t index) const { return GetAttrPointer<float>(index); }
  const bool* GetBool(size_t index) const { return GetAttrPointer<bool>(index); }
  size_t GetAttrNum() const { return values_.size(); }

 private:
  std::vector<AttrValue> values_;
};

class TilingData {
 public:
  explicit TilingData(size_t capacity) : data_(capacity, 0) {}
  void* GetData() { return data_.data(); }
  size_t GetCapacity() const { return data_.size(); }
  void SetDataSize(size_t n) { size_ = n; }
  size_t GetDataSize() const { return size_; }

 private:
  std::vector<uint8_t> data_;
  size_t size_ = 0;
};

class TilingContext {
 public:
  TilingContext(std::vector<StorageShape> inputs, std::vector<ge::DataType> input_types,
                std::vector<StorageShape> outputs, RuntimeAttrs attrs, fe::PlatFormInfos* platform,
                std::string node_name)
      : inputs_(std::move(inputs)), outputs_(std::move(outputs)), attrs_(std::move(attrs)),
        platform_(platform), node_name_(std::move(node_name)), tiling_(64 * 1024) {
    for (auto t : input_types) input_descs_.emplace_back(t);
  }
  const StorageShape* GetInputShape(size_t i) const { return i < inputs_.size() ? &inputs_[i] : nullptr; }
  const StorageShape* GetOutputShape(size_t i) const { return i < outputs_.size() ? &outputs_[i] : nullptr; }
  const CompileTimeTensorDesc* GetInputDesc(size_t i) const {
    return i < input_descs_.size() ? &input_descs_[i] : nullptr;
  }
  const RuntimeAttrs* GetAttrs() const { return &attrs_; }
  fe::PlatFormInfos* GetPlatformInfo() const { return platform_; }
  const char* GetNodeName() const { return node_name_.c_str(); }
  ge::graphStatus SetBlockDim(uint32_t n) {
    block_dim_ = n;
    return ge::GRAPH_SUCCESS;
  }
  uint32_t GetBlockDim() const { return block_dim_; }
  ge::graphStatus SetTilingKey(uint64_t k) {
    tiling_key_ = k;
    return ge::GRAPH_SUCCESS;
  }
  uint64_t GetTilingKey() const { return tiling_key_; }
  template <typename T>
  T* GetTilingData() {
    tiling_.SetDataSize(sizeof(T));
    return new (tiling_.GetData()) T();
  }
  TilingData* GetRawTilingData() { return &tiling_; }
  size_t* GetWorkspaceSizes(size_t n) {
    workspace_.assign(n, 0);
    return workspace_.data();
  }
  const std::vector<size_t>& workspace() const { return workspace_; }

 private:
  std::vector<StorageShape> inputs_;
  std::vector<CompileTimeTensorDesc> input_descs_;
  std::vector<StorageShape> outputs_;
  RuntimeAttrs attrs_;
  fe::PlatFormInfos* platform_;
  std::string node_name_;
  TilingData tiling_;
  uint32_t block_dim_ = 0;
  uint64_t tiling_key_ = 0;
  std::vector<size_t> workspace_;
};

class InferShapeContext {
 public:
  InferShapeContext(std::vector<Shape> inputs, size_t outputs)
      : inputs_(std::move(inputs)), outputs_(outputs) {}
  const Shape* GetInputShape(size_t i) const { return i < inputs_.size() ? &inputs_[i] : nullptr; }
  Shape* GetOutputShape(size_t i) { return i < outputs_.size() ? &outputs_[i] : nullptr; }

 private:
  std::vector<Shape> inputs_;
  std::vector<Shape> outputs_;
};

class InferDataTypeContext {
 public:
  InferDataTypeContext(std::vector<ge::DataType> inputs, size_t outputs)
      : inputs_(std::move(inputs)), outputs_(outputs, ge::DT_FLOAT) {}
  ge::DataType GetInputDataType(size_t i) const { return inputs_.at(i); }
  ge::graphStatus SetOutputDataType(size_t i, ge::DataType t) {
    outputs_.at(i) = t;
    return ge::GRAPH_SUCCESS;
  }
  ge::DataType GetOutputDataType(size_t i) const { return outputs_.at(i); }

 private:
  std::vector<ge::DataType> inputs_;
  std::vector<ge::DataType> outputs_;
};

}  // namespace gert

namespace ops {

enum Option { REQUIRED = 0, OPTIONAL = 1, DYNAMIC = 2 };

using TilingFunc = ge::graphStatus (*)(gert::TilingContext*);
using InferShapeFunc = ge::graphStatus (*)(gert::InferShapeContext*);
using InferDataTypeFunc = ge::graphStatus (*)(gert::InferDataTypeContext*);

class OpParamDef {
 public:
  explicit OpParamDef(std::string name) : name_(std::move(name)) {}
  OpParamDef& ParamType(Option o) { option_ = o; return *this; }
  OpParamDef& DataType(std::vector<ge::DataType> types) { types_ = std::move(types); return *this; }
  OpParamDef& Format(std::vector<ge::Format> formats) { formats_ = std::move(formats); return *this; }
  const std::string& name() const { return name_; }
  const std::vector<ge::DataType>& types() const { return types_; }

 private:
  std::string name_;
  Option option_ = REQUIRED;
  std::vector<ge::DataType> types_;
  std::vector<ge::Format> formats_;
};

class OpAttrDef {
 public:
  explicit OpAttrDef(std::string name) : name_(std::move(name)) {}
  OpAttrDef& AttrType(Option o) { option_ = o; return *this; }
  OpAttrDef& String(const char* v) { default_ = std::string(v); return *this; }
  OpAttrDef& Int(int64_t v) { default_ = v; return *this; }
  OpAttrDef& Float(float v) { default_ = v; return *this; }
  OpAttrDef& Bool(bool v) { default_ = v; return *this; }
  const std::string& name() const { return name_; }
  const gert::AttrValue& default_value() const { return default_; }

 private:
  std::string name_;
  Option option_ = OPTIONAL;
  gert::AttrValue default_;
};

class OpAICoreConfig {};

class OpAICoreDef {
 public:
  OpAICoreDef& SetTiling(TilingFunc f) { tiling_ = f; return *this; }
  OpAICoreDef& AddConfig(const char* soc) { socs_.emplace_back(soc); return *this; }
  OpAICoreDef& AddConfig(const char* soc, OpAICoreConfig&) { return AddConfig(soc); }
  TilingFunc tiling() const { return tiling_; }
  const std::vector<std::string>& socs() const { return socs_; }

 private:
  TilingFunc tiling_ = nullptr;
  std::vector<std::string> socs_;
};

class OpDef {
 public:
  explicit OpDef(const char* name) : name_(name) {}
  virtual ~OpDef() = default;
  OpParamDef& Input(const char* name) { inputs_.emplace_back(name); return inputs_.back(); }
  OpParamDef& Output(const char* name) { outputs_.emplace_back(name); return outputs_.back(); }
  OpAttrDef& Attr(const char* name) { attrs_.emplace_back(name); return attrs_.back(); }
  OpDef& SetInferShape(InferShapeFunc f) { infer_shape_ = f; return *this; }
  OpDef& SetInferDataType(InferDataTypeFunc f) { infer_type_ = f; return *this; }
  OpAICoreDef& AICore() { return aicore_; }

  const std::string& name() const { return name_; }
  const std::vector<OpParamDef>& inputs() const { return inputs_; }
  const std::vector<OpParamDef>& outputs() const { return outputs_; }
  const std::vector<OpAttrDef>& attrs() const { return attrs_; }
  InferShapeFunc infer_shape() const { return infer_shape_; }
  InferDataTypeFunc infer_type() const { return infer_type_; }
  const OpAICoreDef& aicore() const { return aicore_; }

 private:
  std::string name_;
  std::vector<OpParamDef> inputs_;
  std::vector<OpParamDef> outputs_;
  std::vector<OpAttrDef> attrs_;
  InferShapeFunc infer_shape_ = nullptr;
  InferDataTypeFunc infer_type_ = nullptr;
  OpAICoreDef aicore_;
};

inline std::map<std::string, std::unique_ptr<OpDef>>& op_registry() {
  static std::map<std::string, std::unique_ptr<OpDef>> r;
  return r;
}

struct OpRegistrar {
  explicit OpRegistrar(OpDef* def) { op_registry()[def->name()].reset(def); }
};

}  // namespace ops

#define OP_ADD(OPTYPE) static ops::OpRegistrar g_lossgrad_op_add_##OPTYPE(new OPTYPE(#OPTYPE))
