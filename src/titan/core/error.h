// Error type and the one check macro. Library code throws titan::Error; only cli/ prints and exits.
// A message names the thing, says what was found vs expected, and gives the fix:
//   "[rms_norm] weight: expected shape [64], got [32]. HINT: weight must match x's last dim."
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace titan {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// str(a, b, c) concatenates anything with an operator<<.
template <class... Args>
std::string str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

[[noreturn]] void throw_error(const std::string& message, const char* file, int line);

}  // namespace titan

// TITAN_CHECK(cond, parts...): throws titan::Error(str(parts...)) when cond is false. The macro
// exists only to capture __FILE__/__LINE__ (appended to the message in debug builds).
#define TITAN_CHECK(cond, ...)                                              \
  do {                                                                      \
    if (!(cond)) ::titan::throw_error(::titan::str(__VA_ARGS__), __FILE__, __LINE__); \
  } while (0)

#define TITAN_FAIL(...) ::titan::throw_error(::titan::str(__VA_ARGS__), __FILE__, __LINE__)
