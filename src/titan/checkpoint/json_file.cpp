#include "titan/checkpoint/json_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "titan/core/error.h"
#include "titan/core/nesting.h"
#include "titan/core/path_check.h"

namespace titan::ckpt {

std::string read_file_bytes(const std::string& path) {
  std::string problem;
  const int fd = open_regular_file(path, &problem);
  TITAN_CHECK(fd >= 0, "[json] cannot read ", path, ": ", problem);
  std::string out;
  char chunk[65536];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      TITAN_FAIL("[json] cannot read ", path, ": ", std::strerror(err));
    }
    if (n == 0) break;
    out.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

nlohmann::json parse_json_strict(std::string_view text, const std::string& where) {
  // The parser callback sees every key; a stack of key sets (one per open object) finds repeats
  // at any depth. The first repeat is remembered and reported after parsing.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto callback = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      open_objects.emplace_back();
    } else if (event == E::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == E::key && !open_objects.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  check_json_nesting(text, str("[json] ", where));
  nlohmann::json out;
  try {
    out = nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number too large for a double ("1e999") is out_of_range.406.
    // e.what() is "[json.exception.parse_error.101] parse error at line L, column C: ..." or
    // "[json.exception.out_of_range.406] number overflow parsing '1e999'"; drop the bracketed id.
    std::string msg = e.what();
    const size_t at = msg.find("] ");
    if (msg.starts_with("[json.exception.") && at != std::string::npos) msg = msg.substr(at + 2);
    TITAN_FAIL("[json] ", where, ": invalid JSON: ", msg);
  }
  TITAN_CHECK(duplicate.empty(), "[json] ", where, ": duplicate key \"", duplicate,
              "\". HINT: every key in a JSON object must be unique");
  return out;
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json_strict(read_file_bytes(path), path);
}

}  // namespace titan::ckpt
