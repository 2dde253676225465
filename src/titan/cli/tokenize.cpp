// titan tokenize: JSONL (or Parquet rows, or a dataset folder) in, JSONL out, through a Hugging Face
// tokenizer.json.
//   encode: each input line is an object; its --field string becomes one {"ids":[...]} line, with
//   the special tokens the tokenizer's folder adds (HF's encode(add_special_tokens=True): BOS for
//   Llama, nothing for Qwen3) unless --no-special-tokens.
//   --decode: each input line is {"ids":[...]}; it becomes one {"text":"..."} line (bytes that are
//   not valid UTF-8, from ids that cut a character, are written as U+FFFD, as HF's decode does).
// A malformed line stops the run with an error naming the input and the line number.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/core/log.h"
#include "titan/core/nesting.h"
#include "titan/data/dataset.h"
#include "titan/data/tokenizer/special_tokens.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::cli {
namespace {

using nlohmann::json;

json parse_line(const std::string& line, const std::string& where) {
  check_json_nesting(line, where);
  try {
    return json::parse(line);
  } catch (const json::parse_error& e) {
    std::string msg = e.what();
    const size_t at = msg.find("parse error");
    if (at != std::string::npos) msg = msg.substr(at);
    TITAN_FAIL(where, ": invalid JSON: ", msg);
  }
}

std::string encode_line(const data::Tokenizer& tok, const data::SequenceTokens& specials, const json& record,
                        const std::string& field, const std::string& where) {
  TITAN_CHECK(record.is_object(), where, ": expected a JSON object with a \"", field, "\" string");
  const auto it = record.find(field);
  TITAN_CHECK(it != record.end() && it->is_string(), where, ": expected a \"", field,
              "\" string field. HINT: --field names the field to encode");
  std::string out = "{\"ids\":[";
  bool first = true;
  std::vector<int32_t> ids = specials.prefix;
  const std::vector<int32_t> text_ids = tok.encode(it->get_ref<const std::string&>());
  ids.insert(ids.end(), text_ids.begin(), text_ids.end());
  ids.insert(ids.end(), specials.suffix.begin(), specials.suffix.end());
  for (const int32_t id : ids) {
    if (!first) out += ',';
    first = false;
    out += std::to_string(id);
  }
  out += "]}\n";
  return out;
}

std::string decode_line(const data::Tokenizer& tok, const json& record, const std::string& where, int64_t& skipped) {
  TITAN_CHECK(record.is_object(), where, ": expected a JSON object {\"ids\": [...]}");
  const auto it = record.find("ids");
  TITAN_CHECK(it != record.end() && it->is_array(), where, ": expected an \"ids\" array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(it->size());
  for (const json& v : *it) {
    TITAN_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX, where,
                ": \"ids\" holds ", v.dump(), "; expected non-negative integer ids");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  const json out = {{"text", tok.decode(ids, &skipped)}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace

int run_tokenize(int argc, char** argv) {
  const Args args("tokenize",
                  {{"tokenizer", "tokenizer.json, or a folder that holds one", "", false, true},
                   {"input", "JSONL input file, a .parquet file or a dataset folder (default: stdin)", ""},
                   {"field", "the string field of each input object to encode", "text"},
                   {"decode", "read {\"ids\": [...]} lines and write {\"text\": ...} lines", "", true},
                   {"no-special-tokens", "encode without the special tokens the tokenizer's folder adds (BOS for Llama)",
                    "", true}},
                  argc, argv, 2);
  if (args.help_requested()) {
    std::fputs(args.usage().c_str(), stdout);
    return 0;
  }
  const std::string tok_path = args.get("tokenizer");
  const data::Tokenizer tok = data::Tokenizer::from_file(tok_path);
  // The folder decides the special tokens (tokenizer.json's post_processor, tokenizer_config.json's
  // add_bos_token / add_eos_token); a tokenizer.json path means the folder it is in.
  std::filesystem::path folder(tok_path);
  if (!std::filesystem::is_directory(folder)) folder = folder.has_parent_path() ? folder.parent_path() : ".";
  data::SequenceTokens specials;
  if (!args.get_bool("no-special-tokens")) specials = data::sequence_tokens_from_folder(folder.string(), tok);
  const std::string input = args.get("input");
  const std::string name = input.empty() ? "<stdin>" : input;
  const bool decode = args.get_bool("decode");
  const std::string field = args.get("field");
  const bool parquet = input.size() > 8 && input.compare(input.size() - 8, 8, ".parquet") == 0;
  if (!decode && (parquet || std::filesystem::is_directory(input))) {
    // A Parquet file or a dataset folder: its rows' --field, read as training reads them.
    data::DatasetConfig config;
    config.path = input;
    config.text_field = field;
    data::DocumentSource source(config);
    while (const std::optional<data::Document> doc = source.next()) {
      const json record = {{field, doc->text}};
      const std::string out = encode_line(tok, specials, record, field, "[tokenize] " + doc->where);
      std::fwrite(out.data(), 1, out.size(), stdout);
    }
    TITAN_CHECK(std::fflush(stdout) == 0, "[tokenize] cannot write the output");
    return 0;
  }
  std::ifstream file;
  if (!input.empty()) {
    file.open(input, std::ios::binary);
    TITAN_CHECK(file.good(), "[tokenize] cannot open ", input);
  }
  std::istream& in = input.empty() ? std::cin : file;
  std::string line;
  int64_t line_number = 0, skipped = 0;
  while (std::getline(in, line)) {
    ++line_number;
    const std::string where = str("[tokenize] ", name, ":", line_number);
    const json record = parse_line(line, where);
    std::string out;
    try {
      out = decode ? decode_line(tok, record, where, skipped) : encode_line(tok, specials, record, field, where);
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.rfind(where, 0) == 0) throw;
      TITAN_FAIL(where, ": ", msg);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  TITAN_CHECK(!in.bad(), "[tokenize] cannot read ", name);
  TITAN_CHECK(std::fflush(stdout) == 0, "[tokenize] cannot write the output");
  if (skipped > 0) {
    log_warn(str("[tokenize] skipped ", skipped, " id(s) the tokenizer does not know (its vocabulary has ",
                 tok.vocab_size(), " ids; a model's may be padded past it), as HF's decode does"));
  }
  return 0;
}

}  // namespace titan::cli
