#include "titan/train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "titan/config/config_error.h"
#include "titan/core/error.h"

namespace titan::train {

RunLock::RunLock(const std::string& folder, const std::string& field) {
  const std::string path = (std::filesystem::path(folder) / ".titan.lock").string();
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  // O_NOFOLLOW: a link planted here would make the ftruncate below empty a file outside the folder.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0 && errno == ELOOP) {
    config::config_fail("[train] ", path, " is a symbolic link; titan does not follow links out of ", field,
                        ". HINT: remove the link");
  }
  TITAN_CHECK(fd_ >= 0, "[train] cannot open ", path, ": ", std::strerror(errno),
              ". HINT: set --", field, " to a writable folder");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[256] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof(holder) - 1, 0);
    std::string who = n > 0 ? std::string(holder, static_cast<size_t>(n)) : std::string("unknown");
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) TITAN_FAIL("[train] cannot lock ", path, ": ", std::strerror(err));
    config::config_fail("[train] ", field, " ", folder, " is in use by another titan train (", who,
                        "); two runs on one folder would overwrite each other's checkpoints",
                        field == "job.dump_folder" ? " and metrics" : "",
                        ". HINT: wait for that run, or pass another --", field);
  }
  char host[128] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string label = "pid " + std::to_string(::getpid()) + " on " + host + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, label.data(), label.size(), 0);
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace titan::train
