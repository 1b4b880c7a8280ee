// Shape checks and Python-style rendering shared by the ORT kernels and the aclnn wrappers.
// The algorithms are here; the messages and the per-operator check sequences are generated
// from spec.py below them (backends/cxx_shapes.py), so both C++ backends reject a call with
// the text and the aclnn code that spec.validate raises.

namespace lossgrad_shapes {

// str(list(shape)): "[2, 3]", "[]".
inline std::string shape_repr(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t a = 0; a < dims.size(); ++a) {
    if (a) s += ", ";
    s += std::to_string(dims[a]);
  }
  return s + "]";
}

// repr(float): shortest round-trip digits, fixed notation for 1e-4 <= |x| < 1e16.
inline std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // d.ddde[+-]XX
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  std::string digits;
  const bool negative = sci[0] == '-';
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out += digits + std::string(static_cast<size_t>(exponent + 1 - digits.size()), '0') + ".0";
    } else {
      out += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  const int magnitude = std::abs(exponent);
  out += std::string("e") + (exponent < 0 ? "-" : "+") + (magnitude < 10 ? "0" : "") +
         std::to_string(magnitude);
  return out;
}

// A rejected call: the aclnn code (0: none) and spec's message.
struct Failure {
  int code = 0;
  std::string message;
};

// spec.broadcast_shapes for two concrete shapes: the broadcast shape, or the first axis (from
// the left) where both have a size other than 1 and they differ.
struct Conflict {
  int axis = -1;      // -1: the shapes broadcast
  int rank = 0;       // rank of the broadcast
  int64_t first = 0;  // the sizes that differ
  int64_t second = 0;
  int negative_axis() const { return axis - rank; }
};

inline Conflict broadcast_two(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                              std::vector<int64_t>* out) {
  Conflict c;
  const size_t rank = std::max(a.size(), b.size());
  c.rank = static_cast<int>(rank);
  out->assign(rank, 1);
  for (size_t axis = 0; axis < rank; ++axis) {
    int64_t size = 1;
    const std::vector<int64_t>* shapes[2] = {&a, &b};
    for (const auto* s : shapes) {
      const long j = static_cast<long>(axis) - static_cast<long>(rank - s->size());
      if (j < 0) continue;
      const int64_t d = (*s)[static_cast<size_t>(j)];
      if (d == 1) continue;
      if (size != 1 && d != size) {
        c.axis = static_cast<int>(axis);
        c.first = size;
        c.second = d;
        return c;
      }
      size = d;
    }
    (*out)[axis] = size;
  }
  return c;
}

// spec.check_no_enlarge: the first axis of g (from the left) that is neither 1 nor b's size
// there; rank = g's rank. axis == -1: g broadcasts to b without enlarging it.
inline Conflict enlarges(const std::vector<int64_t>& g, const std::vector<int64_t>& b) {
  Conflict c;
  c.rank = static_cast<int>(g.size());
  const size_t offset = b.size() - g.size();
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i] != 1 && g[i] != b[offset + i]) {
      c.axis = static_cast<int>(i);
      c.first = g[i];
      c.second = b[offset + i];
      return c;
    }
  }
  return c;
}

}  // namespace lossgrad_shapes
