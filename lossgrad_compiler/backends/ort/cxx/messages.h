// Rendering of run-time strings in error messages exactly as Python's repr() renders them,
// so a message built here reads the same as the one spec.py raises for the same call (shapes
// and floats: lossgrad_shapes::shape_repr and float_repr, shared with the aclnn wrappers).

namespace lossgrad {

// One step of Python's UTF-8 decoder with errors="replace": the code point at s[i] and the
// number of bytes it takes, or kReplacement for a maximal ill-formed subpart (the lead byte and
// every following byte that may still continue a well-formed sequence, Unicode 3.9 D93b).
constexpr uint32_t kReplacement = 0xfffd;

inline uint32_t decode_utf8(const std::string& s, size_t i, size_t* length) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = at(i);
  *length = 1;
  if (b0 < 0x80) return b0;
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  uint32_t cp = 0;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    need = 1, cp = b0 & 0x1fu;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    need = 2, cp = b0 & 0x0fu;
    if (b0 == 0xe0) lo = 0xa0;
    if (b0 == 0xed) hi = 0x9f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    need = 3, cp = b0 & 0x07u;
    if (b0 == 0xf0) lo = 0x90;
    if (b0 == 0xf4) hi = 0x8f;
  } else {
    return kReplacement;
  }
  for (size_t k = 1; k <= need; ++k) {
    const size_t j = i + k;
    const unsigned char first = k == 1 ? lo : 0x80, last = k == 1 ? hi : 0xbf;
    if (j >= s.size() || at(j) < first || at(j) > last) {
      *length = k;
      return kReplacement;
    }
    cp = (cp << 6) | (at(j) & 0x3fu);
  }
  *length = need + 1;
  return cp;
}

// str.isprintable() of one code point, from the ranges Python reports as unprintable.
inline bool is_printable(uint32_t cp) {
  size_t lo = 0, hi = sizeof(kUnprintable) / sizeof(kUnprintable[0]);
  while (lo < hi) {  // the first range that ends at or after cp
    const size_t mid = (lo + hi) / 2;
    if (kUnprintable[mid][1] < cp) lo = mid + 1;
    else hi = mid;
  }
  return !(lo < sizeof(kUnprintable) / sizeof(kUnprintable[0]) && kUnprintable[lo][0] <= cp);
}

inline void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xc0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xe0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// repr(bytes.decode("utf-8", errors="replace")): the quote Python picks, backslash escapes
// for quotes, backslashes, \t \n \r, and \xhh / \uhhhh / \Uhhhhhhhh for every code point
// that is not printable; the text is always well-formed UTF-8.
inline std::string str_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    size_t length = 1;
    const uint32_t cp = decode_utf8(s, i, &length);
    i += length;
    if (cp == '\\') out += "\\\\";
    else if (cp == '\n') out += "\\n";
    else if (cp == '\r') out += "\\r";
    else if (cp == '\t') out += "\\t";
    else if (cp == static_cast<unsigned char>(quote)) out += std::string("\\") + quote;
    else if (is_printable(cp)) append_utf8(cp, &out);
    else {
      char hex[16];
      if (cp <= 0xff) std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(cp));
      else if (cp <= 0xffff) std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(cp));
      else std::snprintf(hex, sizeof hex, "\\U%08x", static_cast<unsigned>(cp));
      out += hex;
    }
  }
  return out + quote;
}

}  // namespace lossgrad
