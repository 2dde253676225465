#include "titan/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <streambuf>
#include <vector>

#include "titan/core/error.h"

namespace titan::ckpt {
namespace {

// std::ofstream hides its file descriptor, and fsync needs it; this is the smallest streambuf
// over a POSIX fd. It remembers the first errno so the error can say why (ENOSPC, EIO, ...).
class FdStreambuf : public std::streambuf {
 public:
  explicit FdStreambuf(int fd) : fd_(fd), buffer_(1 << 20) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type ch) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    // Large tensors bypass the buffer: one copy less, and write(2) gets big chunks.
    if (n >= static_cast<std::streamsize>(buffer_.size())) {
      if (!drain() || !write_all(s, static_cast<size_t>(n))) return 0;
      return n;
    }
    return std::streambuf::xsputn(s, n);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const size_t n = static_cast<size_t>(pptr() - pbase());
    const bool ok = write_all(pbase(), n);
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return ok;
  }
  bool write_all(const char* p, size_t n) {
    while (n > 0 && error_ == 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error_ = w < 0 ? errno : EIO;
        break;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return error_ == 0;
  }

  int fd_;
  std::vector<char> buffer_;
  int error_ = 0;
};

// After rename, fsync the directory so the new name itself survives a crash. Best effort: some
// filesystems refuse fsync on directories, and the data is already safe in the file.
void fsync_parent_dir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  TITAN_CHECK(fd >= 0, "[atomic_file] cannot write ", path, ": creating ", tmp, " failed: ",
              std::strerror(errno), ". HINT: check that the directory exists and is writable");
  try {
    FdStreambuf buf(fd);
    std::ostream os(&buf);
    write(os);
    os.flush();
    TITAN_CHECK(os.good() && buf.error() == 0, "[atomic_file] writing ", tmp, " failed: ",
                std::strerror(buf.error() ? buf.error() : EIO), " (", path, " left unchanged)");
    TITAN_CHECK(::fsync(fd) == 0, "[atomic_file] fsync of ", tmp, " failed: ", std::strerror(errno),
                " (", path, " left unchanged)");
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  // close() can report a deferred write error (NFS); treat it like any other write failure.
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    TITAN_FAIL("[atomic_file] closing ", tmp, " failed: ", std::strerror(err), " (", path,
               " left unchanged)");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    TITAN_FAIL("[atomic_file] renaming ", tmp, " to ", path, " failed: ", std::strerror(err));
  }
  fsync_parent_dir(path);
}

void write_text_file_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, [&](std::ostream& os) {
    os.write(text.data(), static_cast<std::streamsize>(text.size()));
  });
}

}  // namespace titan::ckpt
