// Shape checks and Python-style rendering shared by the ORT kernels and the aclnn wrappers.
// The algorithms are here; the messages and the per-operator check sequences are generated
// from spec.py below them (backends/cxx_shapes.py), so both C++ backends reject a call with
// the text and the aclnn code that spec.validate raises. kMaxRank (spec.MAX_RANK) is
// generated in front of this text.

namespace lossgrad_shapes {

// A shape held in place, so that an ORT call checks its shapes without touching the heap
// or thread-local storage. A rank above kMaxRank is kept as a count only: every operator's
// check rejects it by its rank before any extent is read.
struct Dims {
  size_t rank = 0;
  int64_t extent[kMaxRank] = {};
  size_t size() const { return rank; }
  int64_t operator[](size_t axis) const { return extent[axis]; }
  int64_t& operator[](size_t axis) { return extent[axis]; }
  // `rank` extents of `value`. The caller's writes through operator[] that follow (the
  // broadcast's) stay within kMaxRank only because the generated checks reject every operand
  // of a larger rank first; the fill is clamped as well, so that a call that broke that
  // order would still stay inside the array.
  void assign(size_t new_rank, int64_t value) {
    rank = new_rank;
    std::fill(extent, extent + std::min(new_rank, kMaxRank), value);
  }
};

// A read-only view of a shape, from either holder: the aclnn wrappers keep their shapes in
// std::vector, the ORT kernels in Dims.
struct Extents {
  const int64_t* data;
  size_t rank;
  Extents(const std::vector<int64_t>& dims) : data(dims.data()), rank(dims.size()) {}
  Extents(const Dims& dims) : data(dims.extent), rank(dims.rank) {}
  size_t size() const { return rank; }
  int64_t operator[](size_t axis) const { return data[axis]; }
};

// str(list(shape)): "[2, 3]", "[]".
inline std::string shape_repr(Extents dims) {
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

// `Out` is Dims or std::vector<int64_t>, as the caller holds its shapes.
template <class Out>
inline Conflict broadcast_two(Extents a, Extents b, Out* out) {
  Conflict c;
  const size_t rank = std::max(a.size(), b.size());
  c.rank = static_cast<int>(rank);
  out->assign(rank, 1);
  for (size_t axis = 0; axis < rank; ++axis) {
    int64_t size = 1;
    const Extents shapes[2] = {a, b};
    for (const Extents& s : shapes) {
      const long j = static_cast<long>(axis) - static_cast<long>(rank - s.size());
      if (j < 0) continue;
      const int64_t d = s[static_cast<size_t>(j)];
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
inline Conflict enlarges(Extents g, Extents b) {
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
