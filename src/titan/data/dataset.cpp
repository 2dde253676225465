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

namespace titan::data {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// 0 = jsonl, 1 = text, -1 = not a dataset file. ".zst" is a compression layer over either.
int format_of(std::string name) {
  if (ends_with(name, ".zst")) name.resize(name.size() - 4);
  if (ends_with(name, ".jsonl") || ends_with(name, ".json")) return 0;
  if (ends_with(name, ".txt")) return 1;
  return -1;
}

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

}  // namespace

bool valid_utf8(const std::string& bytes, size_t* bad_at) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size(), i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len != 0 && i + len <= n;
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (s[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Shortest form only, no UTF-16 surrogates, nothing past U+10FFFF.
    if (ok) {
      ok = !(len == 2 && cp < 0x80) && !(len == 3 && cp < 0x800) && !(len == 4 && cp < 0x10000) &&
           !(cp >= 0xD800 && cp <= 0xDFFF) && cp <= 0x10FFFF;
    }
    if (!ok) {
      if (bad_at) *bad_at = i;
      return false;
    }
    i += len;
  }
  return true;
}

DocumentSource::DocumentSource(DatasetConfig config) : config_(std::move(config)) {
  const std::string& path = config_.path;
  std::error_code ec;
  const std::string problem = path.empty() ? "is empty" : path_problem(path);
  TITAN_CHECK(problem.empty(), "[data] dataset path '", path, "' ", problem,
              ". HINT: set the dataset path to a .jsonl/.json/.txt file or a folder of them.");
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
                ": folder holds no dataset files. HINT: expected *.jsonl, *.json or *.txt (optionally "
                "with .zst) directly inside it.");
  } else {
    TITAN_CHECK(format_of(path) >= 0, "[data] ", path,
                ": unknown file type. HINT: use .jsonl, .json or .txt (optionally with .zst).");
    TITAN_CHECK(fs::is_regular_file(path, ec), "[data] ", path,
                ": not a regular file (a FIFO, device or socket). HINT: set the dataset path to a file or folder "
                "of files; to stream, write the data to a file first");
    files_.push_back(path);
  }
  TITAN_CHECK(config_.format == "text" || config_.format == "chat", "[data] dataset format '", config_.format,
              "' is not text or chat");
  for (const auto& f : files_) {
    formats_.push_back(format_of(f) == 0 ? Format::jsonl : Format::text);
    TITAN_CHECK(config_.format != "chat" || formats_.back() == Format::jsonl, "[data] ", f, ": chat data must be "
                "JSONL ({\"messages\": [...]} per line), not .txt. HINT: convert it, or set training.dataset_format text");
  }
}

DocumentSource::~DocumentSource() = default;
DocumentSource::DocumentSource(DocumentSource&&) noexcept = default;
DocumentSource& DocumentSource::operator=(DocumentSource&&) noexcept = default;

void DocumentSource::seek(const SourcePosition& position) {
  TITAN_CHECK(position.file_index >= 0 && position.file_index <= static_cast<int64_t>(files_.size()) &&
                  position.byte_offset >= 0 && position.line >= 0,
              "[data] ", config_.path, ": position (file ", position.file_index, ", byte ",
              position.byte_offset, ") is outside the ", files_.size(),
              " dataset files. HINT: the dataset changed since the loader state was saved.");
  reader_.reset();
  pos_ = position;
}

void DocumentSource::bad_line(int64_t line, const std::string& what) {
  std::string where = str(files_[static_cast<size_t>(pos_.file_index)], ":", line, ": ", what);
  TITAN_CHECK(config_.skip_bad_lines, "[data] ", where,
              ". HINT: fix the input, or set training.dataset_skip_bad_lines to count and skip such lines");
  ++num_bad_lines_;
  if (num_bad_lines_pass_++ == 0) first_bad_ = where;
}

std::optional<std::string> DocumentSource::next() {
  while (pos_.file_index < static_cast<int64_t>(files_.size())) {
    if (!reader_) {
      reader_ = std::make_unique<LineReader>(files_[static_cast<size_t>(pos_.file_index)], kMaxDocumentBytes);
      reader_->seek(pos_.byte_offset, pos_.line);
      file_had_content_ = pos_.byte_offset > 0;
    }
    std::optional<std::string> doc = read_document();
    if (doc) {
      pos_.byte_offset = reader_->offset();
      pos_.line = reader_->line();
      return doc;
    }
    reader_.reset();
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

std::optional<std::string> DocumentSource::read_document() {
  return formats_[static_cast<size_t>(pos_.file_index)] == Format::jsonl ? read_jsonl() : read_text();
}

std::optional<std::string> DocumentSource::read_jsonl() {
  std::string line;
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
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      bad_line(ln, "malformed JSON (expected one JSON object per line)");
      continue;
    }
    if (config_.format == "chat") {
      // ordered: tojson of tool arguments keeps the line's key order, as Python's json does
      const nlohmann::ordered_json oj = nlohmann::ordered_json::parse(line);
      auto m = oj.find("messages");
      if (m == oj.end()) {
        bad_line(ln, "no field \"messages\" (a chat line is {\"messages\": [{\"role\": ..., \"content\": ...}, ...]}; "
                     "for {\"text\": ...} lines set training.dataset_format text)");
        continue;
      }
      const std::string what = check_messages(*m);
      if (!what.empty()) {
        bad_line(ln, what);
        continue;
      }
      return m->dump();
    }
    auto it = j.find(config_.text_field);
    if (it == j.end()) {
      bad_line(ln, str("no field \"", config_.text_field, "\" (training.dataset_text_field, or titan tokenize --field, "
                       "names the document's field)"));
      continue;
    }
    if (!it->is_string()) {
      bad_line(ln, str("field \"", config_.text_field, "\" is a ", it->type_name(), ", expected a string"));
      continue;
    }
    return it->get<std::string>();
  }
  return std::nullopt;
}

std::optional<std::string> DocumentSource::read_text() {
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
      if (in_doc) return doc;  // the position is now past this blank line
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
  if (in_doc && file_had_content_) return doc;
  return std::nullopt;
}

}  // namespace titan::data
