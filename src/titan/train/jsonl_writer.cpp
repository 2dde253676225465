#include "titan/train/jsonl_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "titan/core/error.h"

namespace titan::train {

JsonlWriter::JsonlWriter(const std::string& path, bool append) : path_(path) {
  const int mode = append ? O_APPEND : O_TRUNC;
  // O_NOFOLLOW: a metrics.jsonl link would have us truncate or append to a file outside the folder.
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | mode | O_CLOEXEC | O_NOFOLLOW, 0666);
  TITAN_CHECK(fd_ >= 0 || errno != ELOOP, "[jsonl] ", path, " is a symbolic link; titan writes only inside its "
              "folder and does not follow links out of it. HINT: remove the link");
  TITAN_CHECK(fd_ >= 0, "[jsonl] cannot open ", path, " for writing: ", std::strerror(errno),
              ". HINT: check that the folder ",
              std::filesystem::path(path).parent_path().string(), " exists and is writable");
}

JsonlWriter::~JsonlWriter() {
  if (fd_ < 0) return;
  (void)::fsync(fd_);
  ::close(fd_);
}

void JsonlWriter::write(const nlohmann::ordered_json& row) {
  TITAN_CHECK(row.is_object(), "[jsonl] ", path_, ": a row must be a JSON object, got ",
              row.type_name(), ". HINT: pass {{\"step\", step}, {\"loss\", loss}, ...}");
  // nlohmann writes doubles in shortest round-trip form and NaN/inf as null; `replace` keeps a
  // bad UTF-8 string in a tag from throwing mid-training.
  std::string line = row.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  line.push_back('\n');
  const char* p = line.data();
  size_t n = line.size();
  while (n > 0) {  // normally one write(2): a whole line or nothing
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    TITAN_CHECK(w > 0, "[jsonl] writing ", path_, " failed: ", std::strerror(w < 0 ? errno : EIO),
                ". HINT: check free space on its disk");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void JsonlWriter::flush() {
  TITAN_CHECK(::fsync(fd_) == 0, "[jsonl] fsync of ", path_, " failed: ", std::strerror(errno),
              ". HINT: check the disk holding it");
}

}  // namespace titan::train
