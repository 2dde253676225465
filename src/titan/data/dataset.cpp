#include "titan/data/dataset.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "titan/core/error.h"
#include "titan/core/nesting.h"
#include "titan/core/log.h"
#include "titan/core/path_check.h"
#include "titan/data/chat_template.h"
#include "titan/data/line_reader.h"
#include "titan/data/parquet.h"

namespace titan::data {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// 0 = jsonl, 1 = text, 2 = parquet, -1 = not a dataset file. ".zst" is a compression layer over
// JSONL and text (Parquet compresses its own pages).
int format_of(std::string name) {
  if (ends_with(name, ".parquet")) return 2;
  if (ends_with(name, ".zst")) name.resize(name.size() - 4);
  if (ends_with(name, ".jsonl") || ends_with(name, ".json")) return 0;
  if (ends_with(name, ".txt")) return 1;
  return -1;
}

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

}  // namespace

DocumentSource::DocumentSource(DatasetConfig config) : config_(std::move(config)), row_format_(config_) {
  const std::string& path = config_.path;
  std::error_code ec;
  const std::string problem = path.empty() ? "is empty" : path_problem(path);
  TITAN_CHECK(problem.empty(), "[data] dataset path '", path, "' ", problem,
              ". HINT: set the dataset path to a .jsonl/.json/.parquet/.txt file or a folder of them.");
  if (fs::is_directory(path, ec)) {
    fs::directory_iterator it(path, ec);
    TITAN_CHECK(!ec, "[data] dataset folder ", path, ": cannot be listed: ", ec.message());
    for (const auto& entry : it) {
      if (format_of(entry.path().filename().string()) < 0) continue;
      // A dataset file that cannot be followed (a symbolic link loop or to a missing target) is
      // named, not skipped: the user meant it to be read.
      const std::string entry_problem = path_problem(entry.path().string());
      TITAN_CHECK(entry_problem.empty(), "[data] ", entry.path().string(), " ", entry_problem,
                  ". HINT: fix or remove it from the dataset folder");
      if (entry.is_regular_file(ec)) files_.push_back(entry.path().string());
    }
    std::sort(files_.begin(), files_.end());  // deterministic order across machines and runs
    TITAN_CHECK(!files_.empty(), "[data] ", path,
                ": folder holds no dataset files. HINT: expected *.jsonl, *.json, *.parquet or *.txt "
                "(optionally with .zst) directly inside it.");
  } else {
    TITAN_CHECK(format_of(path) >= 0, "[data] ", path,
                ": unknown file type. HINT: use .jsonl, .json, .parquet or .txt (optionally with .zst).");
    TITAN_CHECK(fs::is_regular_file(path, ec), "[data] ", path,
                ": not a regular file (a FIFO, device or socket). HINT: set the dataset path to a file or folder "
                "of files; to stream, write the data to a file first");
    files_.push_back(path);
  }
  for (const auto& f : files_) {
    const int format = format_of(f);
    formats_.push_back(format == 0 ? Format::jsonl : format == 2 ? Format::parquet : Format::text);
  }
  detect_layout();
  for (size_t i = 0; i < files_.size(); ++i) {
    TITAN_CHECK(formats_[i] != Format::text || format() == "text", "[data] ", files_[i], ": ", format(), " data must be "
                "JSONL or Parquet rows (", format() == "chat" ? "{\"messages\": [...]}" : "{\"input_ids\": [...]}",
                " per line), not .txt. HINT: convert it, or set training.dataset_format text");
  }
}

// The layout of a chat or auto dataset, from the first file's Parquet schema or first JSONL row
// (rows of no known layout are bad lines: an error, or skipped with skip_bad_lines).
void DocumentSource::detect_layout() {
  const std::string& first = files_.front();
  if (formats_.front() == Format::text) {  // .txt: text documents (chat and pretokenized data refuse it)
    if (format() == "auto") row_format_.detect({config_.text_field}, first);
    return;
  }
  if (formats_.front() == Format::parquet) {
    const ParquetReader reader(first);
    const std::string problem = row_format_.detect(reader.fields(), first);
    TITAN_CHECK(problem.empty(), "[data] ", first, ": ", problem, ". HINT: set training.dataset_format, or name the "
                "fields with training.dataset_text_field / training.chat_messages_field");
    return;
  }
  LineReader reader(first, kMaxDocumentBytes);
  std::string line;
  bool had_newline = false;
  while (!row_format_.detected() && reader.next_line(line, had_newline)) {
    if (is_blank(line) || !valid_utf8(line) || json_too_deep_at(line) != std::string_view::npos) continue;
    const nlohmann::ordered_json row = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded() || !row.is_object()) continue;  // next() names it
    std::vector<std::string> keys;
    for (const auto& [k, v] : row.items()) keys.push_back(k);
    const std::string problem = row_format_.detect(keys, str(first, ":", reader.line()));
    TITAN_CHECK(problem.empty() || config_.skip_bad_lines, "[data] ", first, ":", reader.line(), ": ", problem,
                ". HINT: set training.dataset_format, or name the fields with training.dataset_text_field / "
                "training.chat_messages_field");
  }
  TITAN_CHECK(row_format_.detected(), "[data] ", first, ": no row of a known layout to tell the dataset's format from. "
              "HINT: set training.dataset_format (text, chat or pretokenized)");
}

DocumentSource::~DocumentSource() = default;
DocumentSource::DocumentSource(DocumentSource&&) noexcept = default;
DocumentSource& DocumentSource::operator=(DocumentSource&&) noexcept = default;

void DocumentSource::seek(const SourcePosition& position) {
  parquet_.reset();
  TITAN_CHECK(position.file_index >= 0 && position.file_index <= static_cast<int64_t>(files_.size()) &&
                  position.byte_offset >= 0 && position.line >= 0,
              "[data] ", config_.path, ": position (file ", position.file_index, ", byte ",
              position.byte_offset, ") is outside the ", files_.size(),
              " dataset files. HINT: the dataset changed since the loader state was saved.");
  reader_.reset();
  pos_ = position;
}

void DocumentSource::bad_line(int64_t line, const std::string& what) {
  bad_row(str(files_[static_cast<size_t>(pos_.file_index)], ":", line), what);
}

void DocumentSource::bad_row(const std::string& at, const std::string& what) {
  const std::string where = at + ": " + what;
  TITAN_CHECK(config_.skip_bad_lines, "[data] ", where,
              ". HINT: fix the input, or set training.dataset_skip_bad_lines to count and skip such lines");
  ++num_bad_lines_;
  if (num_bad_lines_pass_++ == 0) first_bad_ = where;
}

void DocumentSource::open_reader() {
  const std::string& path = files_[static_cast<size_t>(pos_.file_index)];
  file_had_content_ = pos_.byte_offset > 0 || pos_.line > 0;
  if (formats_[static_cast<size_t>(pos_.file_index)] != Format::parquet) {
    reader_ = std::make_unique<LineReader>(path, kMaxDocumentBytes);
    reader_->seek(pos_.byte_offset, pos_.line);
    return;
  }
  parquet_ = std::make_unique<ParquetReader>(path);
  // The layout's fields: the required ones must be there, the optional ones are read when they are.
  std::vector<std::string> select = row_format_.required_fields();
  const std::vector<std::string> have = parquet_->fields();
  for (const std::string& f : row_format_.optional_fields()) {
    if (std::find(have.begin(), have.end(), f) != have.end()) select.push_back(f);
  }
  parquet_->select(select);
  parquet_->seek(pos_.line);
}

std::optional<Document> DocumentSource::next() {
  while (pos_.file_index < static_cast<int64_t>(files_.size())) {
    if (!reader_ && !parquet_) open_reader();
    std::optional<Document> doc = read_document();
    if (doc) {
      if (reader_) {
        pos_.byte_offset = reader_->offset();
        pos_.line = reader_->line();
      } else {
        pos_.line = parquet_->row();
      }
      return doc;
    }
    reader_.reset();
    parquet_.reset();
    if (!file_had_content_) bad_line(1, "empty file (no documents)");
    pos_ = SourcePosition{pos_.file_index + 1, 0, 0};
  }
  if (num_bad_lines_pass_ > 0) {
    log_warn(str("[data] skipped ", num_bad_lines_pass_, " bad lines in ", config_.path,
                 " this pass; first: ", first_bad_));
    num_bad_lines_pass_ = 0;
  }
  return std::nullopt;
}

std::optional<Document> DocumentSource::read_document() {
  switch (formats_[static_cast<size_t>(pos_.file_index)]) {
    case Format::jsonl: return read_jsonl();
    case Format::parquet: return read_parquet();
    default: return read_text();
  }
}

std::optional<Document> DocumentSource::read_jsonl() {
  std::string line, problem;
  bool had_newline = false;
  while (reader_->next_line(line, had_newline)) {
    if (is_blank(line)) continue;  // blank lines (a trailing one, say) carry no document
    file_had_content_ = true;
    const int64_t ln = reader_->line();
    size_t bad_at = 0;
    if (!valid_utf8(line, &bad_at)) {
      bad_line(ln, str("invalid UTF-8 at byte ", bad_at + 1, " of the line"));
      continue;
    }
    if (json_too_deep_at(line) != std::string_view::npos) {
      bad_line(ln, str("nested more than ", kMaxJsonNesting, " levels deep"));
      continue;
    }
    // ordered: tojson of tool arguments keeps the line's key order, as Python's json does
    nlohmann::ordered_json row = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded() || !row.is_object()) {
      bad_line(ln, "malformed JSON (expected one JSON object per line)");
      continue;
    }
    Document doc;
    if (!row_format_.document(row, doc, problem)) {
      bad_line(ln, problem);
      continue;
    }
    doc.where = str(reader_->path(), ":", ln);
    return doc;
  }
  return std::nullopt;
}

std::optional<Document> DocumentSource::read_parquet() {
  nlohmann::ordered_json row;
  std::string problem;
  while (parquet_->next(row)) {
    file_had_content_ = true;
    Document doc;
    if (!row_format_.document(row, doc, problem, /*drop_nulls=*/true)) {
      bad_row(str(parquet_->path(), ": row ", parquet_->row() - 1), problem);
      continue;
    }
    doc.where = str(parquet_->path(), ": row ", parquet_->row() - 1);
    return doc;
  }
  return std::nullopt;
}

std::optional<Document> DocumentSource::read_text() {
  std::string line, doc;
  bool had_newline = false, in_doc = false;
  while (reader_->next_line(line, had_newline)) {
    const int64_t ln = reader_->line();
    size_t bad_at = 0;
    if (!valid_utf8(line, &bad_at)) {
      file_had_content_ = true;
      bad_line(ln, str("invalid UTF-8 at byte ", bad_at + 1, " of the line"));
      continue;
    }
    if (!config_.split_blank_lines) {  // the whole file, byte for byte
      doc += line;
      if (had_newline) doc += '\n';
      TITAN_CHECK(doc.size() <= kMaxDocumentBytes, "[data] ", reader_->path(), ": a .txt file is one document, and this "
                  "one is longer than ", kMaxDocumentBytes >> 20, " MiB (line ", ln, "), the most one document may "
                  "hold (it is tokenized whole). HINT: split it into several .txt files or JSONL lines");
      in_doc = true;
      file_had_content_ = file_had_content_ || !is_blank(line);
      continue;
    }
    if (is_blank(line)) {
      if (in_doc) return Document{doc, {}, {}, {}, str(reader_->path(), ":", ln)};  // the position is now past this blank line
      continue;
    }
    file_had_content_ = true;
    if (in_doc) doc += '\n';
    doc += line;
    TITAN_CHECK(doc.size() <= kMaxDocumentBytes, "[data] ", reader_->path(), ":", ln, ": a document longer than ",
                kMaxDocumentBytes >> 20, " MiB, the most one document may hold (it is tokenized whole). HINT: split it "
                "with blank lines");
    in_doc = true;
  }
  if (in_doc && file_had_content_) return Document{doc, {}, {}, {}, reader_->path()};
  return std::nullopt;
}

}  // namespace titan::data
