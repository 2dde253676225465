#include "titan/core/error.h"

namespace titan {

void throw_error(const std::string& message, const char* file, int line) {
#ifdef NDEBUG
  (void)file;
  (void)line;
  throw Error(message);
#else
  throw Error(str(message, " (", file, ":", line, ")"));
#endif
}

}  // namespace titan
