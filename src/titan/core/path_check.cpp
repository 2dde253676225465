#include "titan/core/path_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace titan {

std::string path_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return "";
  const int err = errno;
  if (err == ELOOP) return "is a symbolic link loop";
  if (err == ENOENT) {
    struct stat link {};
    const bool dangling = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
    return dangling ? "is a symbolic link to a missing target" : "does not exist";
  }
  return std::string("cannot be reached: ") + std::strerror(err);
}

int open_regular_file(const std::string& path, std::string* problem) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *problem = std::strerror(errno);
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    *problem = "not a regular file (a FIFO, device, socket or folder)";
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace titan
