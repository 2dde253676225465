// Text <-> value helpers shared by job_config.cpp, overrides.cpp and validate.cpp (internal to
// titan_config; the public interface is job_config.h, overrides.h, registry.h and validate.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace titan::config {

// The shortest text that parses back to the same double: "0.0008" -> "0.0008", 1e-8 -> "1e-08",
// 1.0 -> "1" (to_toml adds ".0" where TOML needs it).
std::string format_double(double value);

std::optional<bool> parse_bool(const std::string& text);      // true/false, 1/0, yes/no, any case
std::optional<int64_t> parse_int(const std::string& text);    // whole text, optional sign
std::optional<double> parse_double(const std::string& text);  // whole text, optional sign, ".5", "8e-4"

// Levenshtein distance (insert, delete, substitute: 1 each).
size_t edit_distance(const std::string& a, const std::string& b);

// "unknown config field '<prefix><path>'; did you mean <prefix><nearest>?<tail>" (no suggestion
// when nothing is close).
std::string unknown_field_message(const std::string& path, const std::string& prefix, const std::string& tail);

}  // namespace titan::config
