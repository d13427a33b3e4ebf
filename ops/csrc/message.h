// Error messages built without iostreams.
//
// Why: pip wheels of torch export their own copies of some libstdc++ stream
// symbols (built with the wheel's toolchain). An extension built on the user's
// machine can then construct an std::ostringstream with the wheel's copy and
// format a number into it with the system libstdc++: on a host with g++ 13.3
// and torch 2.11 that crashed (segfault) on every check whose message holds a
// number, instead of raising. Messages are therefore concatenated here (numbers
// through std::to_chars / snprintf) and handed to TORCH_CHECK as one finished
// std::string, which c10 passes through without a stream. Keep stream
// formatting (operator<<, c10::str with several arguments, STD_TORCH_CHECK)
// out of the extension's error paths.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

namespace dbench::msg {

// A shape, printed as [2, 3].
struct Sizes {
  const int64_t* data;
  size_t size;
};

inline void append(std::string& out, std::string_view s) { out.append(s); }
inline void append(std::string& out, const char* s) { out.append(s ? s : "(null)"); }
inline void append(std::string& out, const std::string& s) { out.append(s); }
inline void append(std::string& out, bool b) { out.append(b ? "true" : "false"); }
inline void append(std::string& out, char c) { out.push_back(c); }

template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>, int> = 0>
void append(std::string& out, T v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// %g: what an ostream prints for a double by default (1e-06, 0.5, 3).
inline void append(std::string& out, double v) {
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%g", v);
  out.append(buf, n > 0 ? static_cast<size_t>(n) : 0);
}

inline void append(std::string& out, const Sizes& s) {
  out.push_back('[');
  for (size_t i = 0; i < s.size; ++i) {
    if (i) out.append(", ");
    append(out, s.data[i]);
  }
  out.push_back(']');
}

template <class... A>
std::string cat(const A&... parts) {
  std::string out;
  (append(out, parts), ...);
  return out;
}

}  // namespace dbench::msg

// Throws fail(message) when cond is false. A macro so that the message parts
// (device names, shapes) are only evaluated on failure, as TORCH_CHECK's are.
#define DBENCH_CHECK(cond, fail, ...)           \
  do {                                          \
    if (!(cond)) {                              \
      fail(::dbench::msg::cat(__VA_ARGS__));    \
    }                                           \
  } while (false)
