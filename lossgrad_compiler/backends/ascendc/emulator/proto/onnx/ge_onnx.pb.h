// lossgrad_compiler Ascend C CPU emulation: the slice of ONNX's protobuf classes that the
// generated ONNX plugins read (a node's attributes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "register/register.h"

namespace ge {
namespace onnx {

class AttributeProto {
 public:
  const std::string& name() const { return name_; }
  const std::string& s() const { return s_; }
  int64_t i() const { return i_; }
  float f() const { return f_; }
  std::string name_, s_;
  int64_t i_ = 0;
  float f_ = 0.0f;
};

class NodeProto : public google::protobuf::Message {
 public:
  const std::vector<AttributeProto>& attribute() const { return attribute_; }
  std::vector<AttributeProto> attribute_;
};

}  // namespace onnx
}  // namespace ge
