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

RunLock::RunLock(const std::string& dump_folder) {
  const std::string path = (std::filesystem::path(dump_folder) / ".titan.lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  TITAN_CHECK(fd_ >= 0, "[train] cannot open ", path, ": ", std::strerror(errno),
              ". HINT: set --job.dump_folder to a writable folder");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[256] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof(holder) - 1, 0);
    std::string who = n > 0 ? std::string(holder, static_cast<size_t>(n)) : std::string("unknown");
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) TITAN_FAIL("[train] cannot lock ", path, ": ", std::strerror(err));
    config::config_fail("[train] job.dump_folder ", dump_folder, " is in use by another titan train (", who,
                        "); two runs on one folder would overwrite each other's checkpoints and metrics. HINT: "
                        "wait for that run, or pass another --job.dump_folder");
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
