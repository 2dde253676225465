// ConfigError: every mistake in a job config (unknown field, bad value, bad TOML, impossible
// combination). A subclass of titan::Error so that the CLI can map it to exit code 2 (usage error)
// while other failures stay exit code 1. Messages are one line: the field, found vs expected, the fix.
#pragma once

#include <string>

#include "titan/core/error.h"

namespace titan::config {

class ConfigError : public titan::Error {
 public:
  using titan::Error::Error;
};

// Throws ConfigError(str(parts...)). Config mistakes are user input, not bugs, so no file:line.
template <class... Args>
[[noreturn]] void config_fail(Args&&... parts) {
  throw ConfigError(titan::str(std::forward<Args>(parts)...));
}

}  // namespace titan::config
