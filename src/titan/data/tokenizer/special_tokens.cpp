#include "titan/data/tokenizer/special_tokens.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "titan/core/error.h"
#include "titan/core/nesting.h"

namespace titan::data {

using nlohmann::json;

// A token field is a string, null, or an AddedToken object {"content": ...}.
static std::optional<std::string> token_field(const json& config, const char* key, const std::string& path) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  TITAN_CHECK(v.is_object() && v.contains("content") && v["content"].is_string(), path, ": field '", key,
              "' must be a string, null or an object with a string \"content\", got ", v.dump());
  return v["content"].get<std::string>();
}

static int32_t id_of(const Tokenizer& tokenizer, const std::string& token, const std::string& path,
                     const char* key) {
  const std::optional<int32_t> id = tokenizer.token_id(token);
  TITAN_CHECK(id.has_value(), path, ": field '", key, "' names \"", token,
              "\", which is not in the tokenizer's vocabulary");
  return *id;
}

static json read_config(const std::string& path) {
  json config = json::object();
  if (std::filesystem::exists(path)) {
    std::ifstream in(path, std::ios::binary);
    TITAN_CHECK(in.good(), path, ": cannot read the file");
    std::ostringstream text;
    text << in.rdbuf();
    check_json_nesting(text.str(), path);
    try {
      config = json::parse(text.str());
    } catch (const json::parse_error& e) {
      TITAN_FAIL(path, ": invalid JSON: ", e.what());
    }
    TITAN_CHECK(config.is_object(), path, ": expected a JSON object");
  }
  return config;
}

// add_bos_token / add_eos_token: true -> [that token], false -> nothing, absent or null -> `fallback`.
static std::vector<int32_t> flag_side(const json& config, const Tokenizer& tokenizer, const std::string& path,
                                      const char* flag, const char* key, const std::vector<int32_t>& fallback) {
  if (!config.contains(flag) || config[flag].is_null()) return fallback;
  TITAN_CHECK(config[flag].is_boolean(), path, ": field '", flag, "' must be true or false");
  if (!config[flag].get<bool>()) return {};
  const auto token = token_field(config, key, path);
  TITAN_CHECK(token.has_value(), path, ": ", flag, " is true but ", key, " is null. HINT: set ", key);
  return {id_of(tokenizer, *token, path, key)};
}

SequenceTokens sequence_tokens_from_folder(const std::string& dir, const Tokenizer& tokenizer) {
  const std::string path = (std::filesystem::path(dir) / "tokenizer_config.json").string();
  const json config = read_config(path);
  return {flag_side(config, tokenizer, path, "add_bos_token", "bos_token", tokenizer.special_prefix()),
          flag_side(config, tokenizer, path, "add_eos_token", "eos_token", tokenizer.special_suffix())};
}

DocumentTokens document_tokens_from_folder(const std::string& dir, const Tokenizer& tokenizer) {
  const std::string path = (std::filesystem::path(dir) / "tokenizer_config.json").string();
  const json config = read_config(path);
  DocumentTokens out;
  if (const auto eot = tokenizer.token_id("<|endoftext|>")) {
    out.eot_id = *eot;
  } else if (const auto eos = token_field(config, "eos_token", path)) {
    out.eot_id = id_of(tokenizer, *eos, path, "eos_token");
  } else {
    TITAN_FAIL(path, ": the tokenizer has no <|endoftext|> and the config no eos_token; cannot ",
               "separate documents. HINT: set eos_token in tokenizer_config.json");
  }
  SequenceTokens seq = sequence_tokens_from_folder(dir, tokenizer);
  out.prefix = std::move(seq.prefix);
  out.suffix = std::move(seq.suffix);
  return out;
}

}  // namespace titan::data
