#include "titan/train/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <type_traits>

#include "titan/core/error.h"
#include "titan/core/crc32c.h"

namespace titan::train {
namespace {

// --- protobuf wire format: just the pieces Event/Summary need. ---
// Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, uint32_t field, uint32_t wire_type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}

template <class T>
void put_le(std::string& out, T v) {
  static_assert(std::is_unsigned_v<T>);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_double(std::string& out, uint32_t field, double v) {
  put_key(out, field, 1);
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_le(out, bits);
}

void put_float(std::string& out, uint32_t field, float v) {
  put_key(out, field, 5);
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_le(out, bits);
}

// int64 fields are plain varints of the two's-complement value (negative = 10 bytes).
void put_int64(std::string& out, uint32_t field, int64_t v) {
  put_key(out, field, 0);
  put_varint(out, static_cast<uint64_t>(v));
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

// Field numbers from tensorboard/compat/proto/event.proto and summary.proto.
constexpr uint32_t kEventWallTime = 1;
constexpr uint32_t kEventStep = 2;
constexpr uint32_t kEventFileVersion = 3;
constexpr uint32_t kEventSummary = 5;
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kValueTag = 1;
constexpr uint32_t kValueSimpleValue = 2;

double wall_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& folder) {
  std::error_code ec;
  // A link in the folder's place would put the event files outside the folder it is named in.
  TITAN_CHECK(!std::filesystem::is_symlink(folder, ec), "[tensorboard] ", folder, " is a symbolic link; titan writes "
              "only inside its folder and does not follow links out of it. HINT: remove the link");
  std::filesystem::create_directories(folder, ec);
  TITAN_CHECK(!ec && std::filesystem::is_directory(folder), "[tensorboard] cannot create log folder ",
              folder, ": ", ec ? ec.message() : std::string("not a directory"),
              ". HINT: point the TensorBoard folder at a writable path");
  const std::string stem = (std::filesystem::path(folder) /
                            str("events.out.tfevents.",
                                static_cast<int64_t>(wall_time_now()), ".", host_name(), ".",
                                ::getpid(), "."))
                               .string();
  // O_EXCL: never append to (or truncate) another writer's file; take the next suffix instead.
  for (int n = 0; fd_ < 0; ++n) {
    path_ = stem + std::to_string(n);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0666);
    TITAN_CHECK(fd_ >= 0 || (errno == EEXIST && n < 1000), "[tensorboard] cannot create event file ",
                path_, ": ", std::strerror(errno), ". HINT: check that ", folder, " is writable");
  }
  std::string event;
  put_double(event, kEventWallTime, wall_time_now());
  put_bytes(event, kEventFileVersion, "brain.Event:2");
  try {
    write_record(event);
  } catch (...) {
    ::close(fd_);
    ::unlink(path_.c_str());
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ < 0) return;
  (void)::fsync(fd_);
  ::close(fd_);
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  add_scalars({{tag, value}}, step);
}

void TensorBoardWriter::add_scalars(const std::vector<std::pair<std::string, double>>& values,
                                    int64_t step) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    TITAN_CHECK(!tag.empty(), "[tensorboard] ", path_, ": empty tag at step ", step,
                ". HINT: name every scalar, e.g. \"train/loss\"");
    std::string v;
    put_bytes(v, kValueTag, tag);
    put_float(v, kValueSimpleValue, static_cast<float>(value));
    put_bytes(summary, kSummaryValue, v);
  }
  std::string event;
  put_double(event, kEventWallTime, wall_time_now());
  put_int64(event, kEventStep, step);
  put_bytes(event, kEventSummary, summary);
  write_record(event);
}

void TensorBoardWriter::flush() {
  TITAN_CHECK(::fsync(fd_) == 0, "[tensorboard] fsync of ", path_, " failed: ",
              std::strerror(errno), ". HINT: check the disk holding the log folder");
}

void TensorBoardWriter::write_record(const std::string& data) {
  std::string record;
  record.reserve(data.size() + 16);
  put_le(record, static_cast<uint64_t>(data.size()));
  put_le(record, crc32c_mask(crc32c(record.data(), 8)));
  record += data;
  put_le(record, crc32c_mask(crc32c(data)));
  // One write(2) per record: a killed process never leaves half a record behind.
  TITAN_CHECK(write_all(fd_, record.data(), record.size()), "[tensorboard] writing ", path_,
              " failed: ", std::strerror(errno), ". HINT: check free space on the log folder's disk");
}

}  // namespace titan::train
