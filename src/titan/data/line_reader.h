// LineReader: streams one file line by line, plain or zstd-compressed (by the ".zst" suffix), and
// tracks where it is (byte offset in the decompressed stream, line number) so that a reader can be
// reopened exactly there. Only a small buffer is held, never the whole file.
//
// Units: offsets are bytes of the (decompressed) content; line numbers are 1-based, and line() is
// the number of the last line returned (0 before the first).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace titan::data {

class LineReader {
 public:
  // Opens `path`; throws titan::Error when it cannot be read. A line longer than `max_line_bytes`
  // is an error naming the file, the line and the limit, found before more than that is buffered.
  explicit LineReader(std::string path, size_t max_line_bytes = SIZE_MAX);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Next line without its '\n' into `line`; `had_newline` says whether one ended it (the last
  // line of a file may lack it). Returns false at end of file.
  bool next_line(std::string& line, bool& had_newline);

  // Positions the reader at `offset` bytes / `line` lines into the content. A plain file seeks;
  // a zstd stream cannot, so it decompresses and discards up to there.
  void seek(int64_t offset, int64_t line);

  int64_t offset() const { return offset_; }
  int64_t line() const { return line_; }
  const std::string& path() const { return path_; }

 private:
  size_t read_some(char* out, size_t capacity);  // 0 at end of content
  bool fill();                                   // appends to buf_; false at end
  void check_length(size_t line_bytes) const;    // throws past max_line_bytes_

  struct Zstd;
  std::string path_;
  size_t max_line_bytes_;
  std::FILE* file_ = nullptr;
  std::unique_ptr<Zstd> zstd_;  // null for plain files
  std::string buf_;             // bytes read but not yet returned, from buf_pos_
  size_t buf_pos_ = 0;
  int64_t offset_ = 0;
  int64_t line_ = 0;
};

}  // namespace titan::data
