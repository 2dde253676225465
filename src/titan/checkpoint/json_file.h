// Reading JSON files (config.json, model.safetensors.index.json) and JSON text with errors that
// name the file and the line/column, and that reject duplicate object keys: nlohmann keeps the
// last of two equal keys silently, which would hide a corrupted or hand-merged file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace titan::ckpt {

// Throws titan::Error "[json] FILE: ..." for a missing/unreadable file or invalid JSON.
nlohmann::json read_json_file(const std::string& path);

// Parses `text`; `where` names its origin in errors ("FILE" or "FILE header").
nlohmann::json parse_json_strict(std::string_view text, const std::string& where);

// The whole file as bytes; throws "[json] cannot read FILE: <reason>" (missing, a directory, ...).
std::string read_file_bytes(const std::string& path);

}  // namespace titan::ckpt
