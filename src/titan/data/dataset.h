// DocumentSource: streams documents, one at a time, from a file or a folder of files. Nothing
// holds more than one document (plus a read buffer, or one Parquet row group), so corpora of any
// size work.
//
// Files, by name (a trailing ".zst" means zstd-compressed, decompressed as a stream):
//   .jsonl / .json  one JSON object (a row) per line.
//   .parquet        Parquet rows (parquet.h): the Hub's data/train-00000-of-00004.parquet shards.
//   .txt            the whole file is one text document, or, with `split_blank_lines`, each run of
//                   non-blank lines is one (its lines joined by '\n').
// A folder means its files with those suffixes (not its subfolders), in sorted name order.
// What a row becomes (DatasetConfig::format; row_format.h): the string field `text_field` (the C4
// layout: {"text": ..., "timestamp": ..., "url": ...}), a chat conversation (OpenAI, ShareGPT or
// Alpaca layout), or pretokenized ids; "auto" decides from the first row.
//
// Bad input (invalid UTF-8, malformed JSON, a missing or non-string field, an empty file) is a
// titan::Error "path:line: ..." unless `skip_bad_lines`: then the line is counted, skipped, and the
// count is logged with log_warn at the end of each pass.
//
// Position: where the next document starts (file index, byte offset, line; for a Parquet file the
// line is the row index and the byte offset 0: the row group follows from the footer). A source
// reopened at a position yields exactly what the original would have yielded next.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "titan/core/utf8.h"
#include "titan/data/row_format.h"

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
  // "text": documents as above. "chat": JSONL/Parquet rows in a chat layout; the messages list
  // (checked by check_messages in chat_template.h) is the document (Document::messages).
  // "pretokenized": rows of input_ids [+ labels]. "auto": one of those, by the first row's fields.
  std::string format = "text";
  std::string chat_messages_field = "";  // chat: the list of messages ("" = detect: messages, conversations)
  std::string chat_role_key = "";        // chat: a message's role key ("" = role or from)
  std::string chat_content_key = "";     // chat: its text key ("" = content, value or text)
  std::string chat_role_map = "";        // chat: "from=to,..." before the built-in map (human=user, gpt=assistant, ...)
};

struct SourcePosition {
  int64_t file_index = 0;   // into files(); == files().size() at the end of a pass
  int64_t byte_offset = 0;  // into the (decompressed) file
  int64_t line = 0;         // lines already consumed in that file
};

class LineReader;
class ParquetReader;

class DocumentSource {
 public:
  // Lists the files and decides the rows' layout (reading the first rows of the first file for
  // "chat" and "auto"); throws for a missing path, an empty folder, an unknown file suffix, or
  // rows of no known layout.
  explicit DocumentSource(DatasetConfig config);
  ~DocumentSource();
  DocumentSource(DocumentSource&&) noexcept;
  DocumentSource& operator=(DocumentSource&&) noexcept;

  // The next document of this pass, or nullopt when the pass is over (then rewind()).
  std::optional<Document> next();
  // What the documents are: "text", "chat" or "pretokenized" (never "auto": decided on construction).
  const std::string& format() const { return row_format_.format(); }
  SourcePosition position() const { return pos_; }
  void seek(const SourcePosition& position);  // throws when the position is outside the file list
  void rewind() { seek(SourcePosition{}); }

  const std::vector<std::string>& files() const { return files_; }
  int64_t num_bad_lines() const { return num_bad_lines_; }  // skipped so far, all passes

 private:
  enum class Format { jsonl, text, parquet };
  void open_reader();                        // on files_[pos_.file_index], at pos_
  std::optional<Document> read_document();  // from the open reader; nullopt at end of file
  std::optional<Document> read_jsonl();
  std::optional<Document> read_parquet();
  std::optional<Document> read_text();
  void detect_layout();                      // the constructor's peek at the first rows
  void bad_line(int64_t line, const std::string& what);  // throws, or counts when skipping
  void bad_row(const std::string& at, const std::string& what);  // the same at "path: row N"

  DatasetConfig config_;
  std::vector<std::string> files_;
  std::vector<Format> formats_;
  SourcePosition pos_;
  RowFormat row_format_;
  std::unique_ptr<LineReader> reader_;      // open on files_[pos_.file_index] (JSONL, .txt), or null
  std::unique_ptr<ParquetReader> parquet_;  // open on it (Parquet), or null
  bool file_had_content_ = false;       // for the empty-file check
  int64_t num_bad_lines_ = 0;
  int64_t num_bad_lines_pass_ = 0;
  std::string first_bad_;  // "path:line: what" of this pass's first skipped line, for the warning
};

using titan::valid_utf8;  // core/utf8.h

}  // namespace titan::data
