// DocumentSource: streams text documents, one at a time, from a file or a folder of files. Nothing
// holds more than one document (plus a read buffer), so corpora of any size work.
//
// Formats (chat: see DatasetConfig::format), by file name (a trailing ".zst" means zstd-compressed, decompressed as a stream):
//   .jsonl / .json  one JSON object per line; the document is the string field `text_field`
//                   (the C4 layout: {"text": ..., "timestamp": ..., "url": ...}).
//   .txt            the whole file is one document, or, with `split_blank_lines`, each run of
//                   non-blank lines is one (its lines joined by '\n').
// A folder means its files with those suffixes (not its subfolders), in sorted name order.
//
// Bad input (invalid UTF-8, malformed JSON, a missing or non-string field, an empty file) is a
// titan::Error "path:line: ..." unless `skip_bad_lines`: then the line is counted, skipped, and the
// count is logged with log_warn at the end of each pass.
//
// Position: where the next document starts (file index, byte offset, line). A source reopened at
// a position yields exactly what the original would have yielded next.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace titan::data {

// The most bytes one document may hold: a document is tokenized whole, at about 20x its size in
// memory, so a longer line (or .txt file) is refused, naming the file and line, instead of being
// found by the allocator or the OOM killer.
inline constexpr size_t kMaxDocumentBytes = size_t{64} << 20;

struct DatasetConfig {
  std::string path;                 // a file or a folder
  std::string text_field = "text";  // JSONL: the field holding the document
  bool split_blank_lines = false;   // .txt: one document per blank-line-separated block
  bool skip_bad_lines = false;      // count and skip bad input instead of throwing
  // "text": documents as above. "chat": JSONL only; each line's "messages" list (checked by
  // check_messages in chat_template.h) is the document, as compact JSON text.
  std::string format = "text";
};

struct SourcePosition {
  int64_t file_index = 0;   // into files(); == files().size() at the end of a pass
  int64_t byte_offset = 0;  // into the (decompressed) file
  int64_t line = 0;         // lines already consumed in that file
};

class LineReader;

class DocumentSource {
 public:
  // Lists the files; throws for a missing path, an empty folder, or an unknown file suffix.
  explicit DocumentSource(DatasetConfig config);
  ~DocumentSource();
  DocumentSource(DocumentSource&&) noexcept;
  DocumentSource& operator=(DocumentSource&&) noexcept;

  // The next document of this pass, or nullopt when the pass is over (then rewind()).
  std::optional<std::string> next();
  SourcePosition position() const { return pos_; }
  void seek(const SourcePosition& position);  // throws when the position is outside the file list
  void rewind() { seek(SourcePosition{}); }

  const std::vector<std::string>& files() const { return files_; }
  int64_t num_bad_lines() const { return num_bad_lines_; }  // skipped so far, all passes

 private:
  enum class Format { jsonl, text };
  std::optional<std::string> read_document();  // from the open reader; nullopt at end of file
  std::optional<std::string> read_jsonl();
  std::optional<std::string> read_text();
  void bad_line(int64_t line, const std::string& what);  // throws, or counts when skipping

  DatasetConfig config_;
  std::vector<std::string> files_;
  std::vector<Format> formats_;
  SourcePosition pos_;
  std::unique_ptr<LineReader> reader_;  // open on files_[pos_.file_index], or null
  bool file_had_content_ = false;       // for the empty-file check
  int64_t num_bad_lines_ = 0;
  int64_t num_bad_lines_pass_ = 0;
  std::string first_bad_;  // "path:line: what" of this pass's first skipped line, for the warning
};

// True when `bytes` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF);
// `bad_at` then gets the offset of the first bad byte.
bool valid_utf8(const std::string& bytes, size_t* bad_at = nullptr);

}  // namespace titan::data
