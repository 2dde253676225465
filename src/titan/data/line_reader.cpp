#include "titan/data/line_reader.h"

#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "titan/core/error.h"
#include "titan/core/path_check.h"

namespace titan::data {

namespace {
constexpr size_t kChunk = 64 * 1024;  // read granularity; lines longer than this just take more reads

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

// Streaming decompression state: compressed bytes come from file_ in ZSTD_DStreamInSize() chunks.
struct LineReader::Zstd {
  ZSTD_DCtx* dctx = nullptr;
  std::vector<char> in;
  ZSTD_inBuffer input{nullptr, 0, 0};
  bool file_eof = false;
  size_t compressed_bytes = 0;
  // The decoder's last answer on a call that made progress: 0 when a frame has just ended. A call
  // with no input left returns the next frame's header size, so only progress calls count.
  size_t pending = 0;
  ~Zstd() { ZSTD_freeDCtx(dctx); }
};

LineReader::LineReader(std::string path, size_t max_line_bytes)
    : path_(std::move(path)), max_line_bytes_(max_line_bytes) {
  std::string problem;
  const int fd = open_regular_file(path_, &problem);
  TITAN_CHECK(fd >= 0, "[data] ", path_, ": cannot open (", problem, "). HINT: check the dataset path.");
  file_ = ::fdopen(fd, "rb");
  if (file_ == nullptr) ::close(fd);
  TITAN_CHECK(file_ != nullptr, "[data] ", path_, ": cannot open (", std::strerror(errno), ")");
  if (ends_with(path_, ".zst")) {
    zstd_ = std::make_unique<Zstd>();
    zstd_->dctx = ZSTD_createDCtx();
    TITAN_CHECK(zstd_->dctx != nullptr, "[data] ", path_, ": ZSTD_createDCtx failed");
    zstd_->in.resize(ZSTD_DStreamInSize());
  }
}

LineReader::~LineReader() {
  if (file_) std::fclose(file_);
}

size_t LineReader::read_some(char* out, size_t capacity) {
  if (!zstd_) {
    size_t n = std::fread(out, 1, capacity, file_);
    TITAN_CHECK(n > 0 || !std::ferror(file_), "[data] ", path_, ": read error");
    return n;
  }
  Zstd& z = *zstd_;
  for (;;) {
    if (z.input.pos == z.input.size && !z.file_eof) {
      size_t n = std::fread(z.in.data(), 1, z.in.size(), file_);
      TITAN_CHECK(n > 0 || !std::ferror(file_), "[data] ", path_, ": read error");
      z.file_eof = n == 0;
      z.compressed_bytes += n;
      z.input = ZSTD_inBuffer{z.in.data(), n, 0};
    }
    if (z.compressed_bytes == 0) return 0;  // an empty .zst file holds no content (not a frame)
    ZSTD_outBuffer output{out, capacity, 0};
    const size_t in_before = z.input.pos;
    size_t ret = ZSTD_decompressStream(z.dctx, &output, &z.input);
    TITAN_CHECK(!ZSTD_isError(ret), "[data] ", path_, ": zstd: ", ZSTD_getErrorName(ret),
                ". HINT: the file is not valid zstd; recompress it or drop the .zst suffix.");
    if (output.pos > 0 || z.input.pos > in_before) z.pending = ret;
    if (output.pos > 0) return output.pos;
    if (z.input.pos == z.input.size && z.file_eof) {
      // pending != 0: the decoder still expected input, so the last frame was cut short.
      TITAN_CHECK(z.pending == 0, "[data] ", path_, ": zstd stream is truncated. HINT: recompress the file.");
      return 0;
    }
  }
}

bool LineReader::fill() {
  if (buf_pos_ > 0) {  // drop returned bytes so the buffer stays about one chunk plus one line
    buf_.erase(0, buf_pos_);
    buf_pos_ = 0;
  }
  size_t old = buf_.size();
  buf_.resize(old + kChunk);
  size_t n = read_some(buf_.data() + old, kChunk);
  buf_.resize(old + n);
  return n > 0;
}

void LineReader::check_length(size_t line_bytes) const {
  TITAN_CHECK(line_bytes <= max_line_bytes_, "[data] ", path_, ":", line_ + 1, ": a line longer than ",
              max_line_bytes_ >> 20, " MiB, the most one document may hold (it is tokenized whole). HINT: split "
              "it into smaller documents");
}

bool LineReader::next_line(std::string& line, bool& had_newline) {
  size_t scan = buf_pos_;
  for (;;) {
    size_t nl = buf_.find('\n', scan);
    check_length(nl != std::string::npos ? nl - buf_pos_ : buf_.size() - buf_pos_);
    if (nl != std::string::npos) {
      line.assign(buf_, buf_pos_, nl - buf_pos_);
      offset_ += static_cast<int64_t>(nl + 1 - buf_pos_);
      buf_pos_ = nl + 1;
      had_newline = true;
      ++line_;
      return true;
    }
    size_t scanned = buf_.size() - buf_pos_;  // fill() moves the unread bytes to the front
    if (!fill()) break;
    scan = scanned;
  }
  if (buf_pos_ == buf_.size()) return false;
  line.assign(buf_, buf_pos_, std::string::npos);
  offset_ += static_cast<int64_t>(buf_.size() - buf_pos_);
  buf_pos_ = buf_.size();
  had_newline = false;
  ++line_;
  return true;
}

void LineReader::seek(int64_t offset, int64_t line) {
  TITAN_CHECK(offset_ == 0 && buf_.empty(), "[data] ", path_, ": seek only on a fresh reader");
  if (!zstd_) {
    TITAN_CHECK(std::fseek(file_, offset, SEEK_SET) == 0, "[data] ", path_, ": cannot seek to byte ",
                offset);
  } else {
    std::vector<char> sink(kChunk);
    int64_t left = offset;
    while (left > 0) {
      size_t n = read_some(sink.data(), static_cast<size_t>(std::min<int64_t>(left, kChunk)));
      TITAN_CHECK(n > 0, "[data] ", path_, ": ends before byte ", offset,
                  " of the saved loader state. HINT: the file changed since the state was saved.");
      left -= static_cast<int64_t>(n);
    }
  }
  offset_ = offset;
  line_ = line;
}

}  // namespace titan::data
