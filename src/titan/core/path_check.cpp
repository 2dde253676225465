#include "titan/core/path_check.h"

#include <sys/stat.h>

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

}  // namespace titan
