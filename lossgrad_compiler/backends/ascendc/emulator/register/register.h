// lossgrad_compiler Ascend C CPU emulation: the framework-plugin registration API (domi), so
// generated ONNX plugins can be compiled and checked without the CANN toolkit.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>

namespace google {
namespace protobuf {
class Message {
 public:
  virtual ~Message() = default;
};
}  // namespace protobuf
}  // namespace google

namespace ge {
class Operator {
 public:
  void SetAttr(const char* name, const std::string& v) { attrs[name] = v; }
  void SetAttr(const char* name, const char* v) { attrs[name] = std::string(v); }
  void SetAttr(const char* name, int64_t v) { attrs[name] = v; }
  void SetAttr(const char* name, float v) { attrs[name] = v; }
  std::map<std::string, std::variant<std::string, int64_t, float>> attrs;
};
}  // namespace ge

namespace domi {

using Message = google::protobuf::Message;
enum Status { SUCCESS = 0, FAILED = 1 };
enum FrameworkType { CAFFE = 0, TENSORFLOW = 3, ONNX = 5 };
enum class ImplyType { BUILDIN = 0, TVM = 1, CUSTOM = 2, AI_CPU = 3 };
using ParseParamFunc = Status (*)(const Message*, ge::Operator&);

class OpRegistrationData {
 public:
  explicit OpRegistrationData(const char* op_type) : op_type_(op_type) {}
  OpRegistrationData& FrameworkType(domi::FrameworkType t) { framework_ = t; return *this; }
  OpRegistrationData& OriginOpType(const char* origin) { origin_ = origin; return *this; }
  OpRegistrationData& ParseParamsFn(ParseParamFunc f) { parse_ = f; return *this; }
  OpRegistrationData& ImplyType(domi::ImplyType t) { imply_ = t; return *this; }

 private:
  std::string op_type_;
  std::string origin_;
  domi::FrameworkType framework_ = ONNX;
  domi::ImplyType imply_ = domi::ImplyType::TVM;
  ParseParamFunc parse_ = nullptr;
};

}  // namespace domi

#define LOSSGRAD_CONCAT_(A, B) A##B
#define LOSSGRAD_CONCAT(A, B) LOSSGRAD_CONCAT_(A, B)
#define REGISTER_CUSTOM_OP(NAME) \
  static ::domi::OpRegistrationData LOSSGRAD_CONCAT(g_lossgrad_register_, __COUNTER__) = \
      ::domi::OpRegistrationData(NAME)
