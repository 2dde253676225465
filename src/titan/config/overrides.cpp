#include "titan/config/overrides.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include <toml++/toml.h>

#include "titan/config/registry.h"
#include "titan/config/value_text.h"
#include "titan/core/nesting.h"
#include "titan/core/path_check.h"

namespace titan::config {

namespace {

constexpr const char* kCliTail = " (titan train --help lists all)";

// ---- CLI ----------------------------------------------------------------------------------------

struct FieldFlag {
  std::string path;   // "training.steps"
  std::string value;  // text for set_field
};

struct ParsedArgs {
  std::vector<FieldFlag> fields;  // in command-line order
  std::optional<std::string> config_name;
  bool print_config = false;
  std::vector<std::string> positional;
};

// Splits args into field flags (checked against the field table), the resolve-only flags
// (--config, --print-config, when `resolve_flags`) and positional arguments.
ParsedArgs parse_args(const std::vector<std::string>& args, bool resolve_flags) {
  ParsedArgs out;
  std::string last_bare_boolean;  // a boolean flag given without "=value", just before this arg
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const std::string previous_bare_boolean = std::exchange(last_bare_boolean, "");
    if (!arg.starts_with("--")) {
      if (!previous_bare_boolean.empty() && parse_bool(arg)) {
        config_fail("unexpected argument '", arg, "' after --", previous_bare_boolean,
                    "; boolean flags take no separate value: use --", previous_bare_boolean, "=", arg,
                    " or --no-", previous_bare_boolean);
      }
      if (!resolve_flags) {
        config_fail("unexpected argument '", arg, "'; config flags look like --training.steps 10 or --training.steps=10");
      }
      out.positional.push_back(arg);
      continue;
    }
    const std::string body = arg.substr(2);
    const size_t equals = body.find('=');
    const std::string name = body.substr(0, equals);
    std::optional<std::string> value;
    if (equals != std::string::npos) value = body.substr(equals + 1);

    // Takes the value from "=..." or from the next argument.
    const auto take_value = [&](const std::string& placeholder) -> std::string {
      if (value) return *value;
      if (i + 1 < args.size() && !args[i + 1].starts_with("--")) return args[++i];
      config_fail("--", name, ": missing value; use --", name, " ", placeholder, " or --", name, "=", placeholder);
    };

    if (resolve_flags && name == "config") {
      out.config_name = take_value("NAME");
      continue;
    }
    if (resolve_flags && name == "print-config") {
      if (value) config_fail("--print-config takes no value; found '", arg, "'");
      out.print_config = true;
      continue;
    }
    if (name.starts_with("no-") && find_field(name) == nullptr) {
      const std::string path = name.substr(3);
      const Field* field = find_field(path);
      if (field == nullptr) config_fail(unknown_field_message(path, "--no-", kCliTail));
      if (field->type != FieldType::boolean) {
        config_fail("--no-", path, ": --no- negates boolean fields only, and ", path, " is ",
                    field->type == FieldType::integer ? "an " : "a ", field_type_name(field->type), "; use --", path,
                    " VALUE");
      }
      if (value) config_fail("--no-", path, " takes no value; found '", arg, "'; use --no-", path, " or --", path, "=VALUE");
      out.fields.push_back({path, "false"});
      continue;
    }
    const Field* field = find_field(name);
    if (field == nullptr) config_fail(unknown_field_message(name, "--", kCliTail));
    if (field->type == FieldType::boolean) {
      if (!value) last_bare_boolean = name;
      out.fields.push_back({name, value.value_or("true")});
    } else {
      out.fields.push_back({name, take_value("VALUE")});
    }
  }
  return out;
}

// ---- TOML ---------------------------------------------------------------------------------------

const char* toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: return "a date/time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::vector<std::string> section_names() {
  std::vector<std::string> sections;
  for (const Field& field : job_config_fields()) {
    const std::string section = field.path.substr(0, field.path.find('.'));
    if (sections.empty() || sections.back() != section) sections.push_back(section);
  }
  return sections;
}

std::string toml_quote(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(ch)));
          out += escaped;
        } else {
          out += ch;  // UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

// A field value as TOML: strings quoted, numbers always with '.', 'e', inf or nan so that they
// read back as floats.
std::string toml_value(const Field& field, const std::string& text) {
  switch (field.type) {
    case FieldType::string: return toml_quote(text);
    case FieldType::number:
      if (text.find_first_of(".eEin") == std::string::npos) return text + ".0";
      return text;
    case FieldType::boolean:
    case FieldType::integer: return text;
  }
  return text;
}

void apply_toml_value(JobConfig& config, const Field& field, const toml::node& node, const std::string& where) {
  const char* expected = "";
  switch (field.type) {
    case FieldType::boolean:
      if (const auto* v = node.as_boolean()) return set_field(config, field.path, v->get() ? "true" : "false");
      expected = "a boolean (true or false)";
      break;
    case FieldType::integer:
      if (const auto* v = node.as_integer()) return set_field(config, field.path, std::to_string(v->get()));
      expected = "an integer";
      break;
    case FieldType::number:
      if (const auto* v = node.as_floating_point()) return set_field(config, field.path, format_double(v->get()));
      if (const auto* v = node.as_integer()) return set_field(config, field.path, std::to_string(v->get()));
      expected = "a number";
      break;
    case FieldType::string:
      if (const auto* v = node.as_string()) return set_field(config, field.path, v->get());
      expected = "a string (in quotes)";
      break;
  }
  // The fix: an example of the right form (the field's default), or drop the quotes.
  std::string hint = str("; e.g. ", field.path.substr(field.path.find('.') + 1), " = ",
                         toml_value(field, field.default_value));
  if (node.is_string()) hint = "; write it without quotes";
  config_fail(where, field.path, ": expected ", expected, ", got ", toml_type_name(node), hint);
}

std::string nearest_section(const std::string& name) {
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const std::string& section : section_names()) {
    const size_t distance = edit_distance(name, section);
    if (distance < best_distance) {
      best_distance = distance;
      best = section;
    }
  }
  return best_distance <= std::max<size_t>(1, name.size() / 4) ? best : std::string();
}

}  // namespace

JobConfig apply_cli_overrides(JobConfig config, const std::vector<std::string>& args) {
  for (const FieldFlag& flag : parse_args(args, /*resolve_flags=*/false).fields) set_field(config, flag.path, flag.value);
  return config;
}

ResolveResult resolve_config(const std::vector<std::string>& args) {
  ParsedArgs parsed = parse_args(args, /*resolve_flags=*/true);
  if (!parsed.config_name) {
    std::string known;
    for (const ConfigEntry& entry : config_registry()) known += (known.empty() ? "" : ", ") + entry.name;
    config_fail("titan train: --config NAME is required; use one of ", known);
  }
  ResolveResult result;
  result.config_name = *parsed.config_name;
  result.print_config = parsed.print_config;
  result.unknown_positional = std::move(parsed.positional);
  result.config = find_config(result.config_name).fn();
  const JobConfig from_function = result.config;  // for model.hf_path: what the file and flags changed

  // --job.config_file first: the file sits between the function and the other flags.
  for (const FieldFlag& flag : parsed.fields) {
    if (flag.path == "job.config_file") result.config.job.config_file = flag.value;
  }
  const std::string config_file = result.config.job.config_file;
  if (!config_file.empty()) {
    apply_toml_file(result.config, config_file);
    // No includes: a job file naming another job file would be ignored, so it is an error; naming
    // itself (what --print-config writes after reading it) is fine.
    const std::string named = result.config.job.config_file;
    std::filesystem::path named_path(named);  // relative to the job file's folder
    if (named_path.is_relative()) named_path = std::filesystem::path(config_file).parent_path() / named_path;
    std::error_code ec;
    if (!named.empty() && named != config_file && !std::filesystem::equivalent(named_path, config_file, ec)) {
      config_fail(config_file, ": config_file = '", named, "' names another job file, which would not be read (job "
                  "files do not include others); remove that line, or merge that file's fields into this one");
    }
    result.config.job.config_file = config_file;  // the file read is the one recorded
  }
  for (const FieldFlag& flag : parsed.fields) set_field(result.config, flag.path, flag.value);
  expand_hf_path(result.config, from_function);
  return result;
}

void expand_hf_path(JobConfig& c, const JobConfig& from_function) {
  const std::string& dir = c.model.hf_path;
  if (dir.empty()) return;
  // Each field the job file or a flag set (to other than the function's value) wins.
  if (c.model.name == from_function.model.name) c.model.name = "";
  if (c.model.hf_assets_path == from_function.model.hf_assets_path) c.model.hf_assets_path = dir;
  CheckpointSection& k = c.checkpoint;
  if (k.initial_load_path == from_function.checkpoint.initial_load_path) {
    k.initial_load_path = dir;
    if (k.initial_load_in_hf == from_function.checkpoint.initial_load_in_hf) k.initial_load_in_hf = true;
  }
}

void apply_toml_file(JobConfig& config, const std::string& path) {
  std::error_code ec;
  if (const std::string problem = path_problem(path); !problem.empty()) {
    config_fail("job.config_file: '", path, "' ", problem, "; pass a TOML file (--print-config writes one)");
  }
  if (std::filesystem::is_directory(path, ec)) {
    config_fail("job.config_file: '", path, "' is a folder; pass a TOML file (--print-config writes one)");
  }
  // A device or a pipe (/dev/zero, /dev/urandom) never ends, and no job file is megabytes long:
  // both are refused before anything is read.
  if (!std::filesystem::is_regular_file(path, ec)) {
    config_fail("job.config_file: '", path, "' is not a regular file (a device, pipe or socket); pass a TOML file "
                "(--print-config writes one)");
  }
  constexpr std::uintmax_t kMaxBytes = 4u << 20;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxBytes) {
    config_fail("job.config_file: '", path, "' is ", size, " bytes, more than a job file's limit of ", kMaxBytes,
                " (4 MiB); pass a TOML file (--print-config writes one)");
  }
  std::ifstream in(path, std::ios::binary);
  std::string text(kMaxBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));  // bounded even if the file grows meanwhile
  if (in.bad() || !in.is_open()) config_fail("job.config_file: cannot read '", path, "'; check its permissions");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxBytes) config_fail("job.config_file: '", path, "' is more than a job file's limit of 4 MiB");
  apply_toml_text(config, text, path);
}

void apply_toml_text(JobConfig& target, const std::string& text, const std::string& origin) {
  // All or nothing: work on a copy, so that a mistake on line 9 leaves lines 1-8 unapplied too.
  JobConfig config = target;
  try {
    check_toml_key_parts(text, origin);  // before toml++, whose nested tables recurse
  } catch (const Error& e) {
    config_fail(e.what());
  }
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    config_fail(origin, ":", begin.line, ":", begin.column, ": TOML parse error: ", e.description());
  }
  const auto where = [&](const auto& source) { return str(origin, ":", source.begin.line, ": "); };
  for (const auto& [section_key, section_node] : root) {
    const std::string section(section_key.str());
    const std::vector<std::string> sections = section_names();
    const bool known = std::find(sections.begin(), sections.end(), section) != sections.end();
    const toml::table* table = section_node.as_table();
    if (table == nullptr) {
      if (known) config_fail(where(section_key.source()), "'", section, "' must be a [", section, "] section, not ",
                             toml_type_name(section_node));
      const std::string nearest = nearest_field(section);
      if (!nearest.empty()) {
        config_fail(where(section_key.source()), "'", section, "' is outside any [section]; did you mean ",
                    nearest.substr(nearest.find('.') + 1), " under [", nearest.substr(0, nearest.find('.')), "]?");
      }
      config_fail(where(section_key.source()), "'", section, "' is outside any [section]; every field lives in one",
                  kCliTail);
    }
    if (!known) {
      const std::string nearest = nearest_section(section);
      config_fail(where(section_key.source()), "unknown section [", section, "]",
                  nearest.empty() ? std::string() : str("; did you mean [", nearest, "]?"));
    }
    for (const auto& [key, node] : *table) {
      const std::string path = section + "." + std::string(key.str());
      const Field* field = find_field(path);
      if (field == nullptr) config_fail(where(key.source()), unknown_field_message(path, "", ""));
      apply_toml_value(config, *field, node, where(node.source()));
    }
  }
  target = config;
}

std::string to_toml(const JobConfig& config) {
  std::string out = "# titan.cpp job config: every field, each after its help. Load with --job.config_file FILE.\n";
  std::string section;
  for (const Field& field : job_config_fields()) {
    const size_t dot = field.path.find('.');
    if (field.path.compare(0, dot, section) != 0 || section.size() != dot) {
      section = field.path.substr(0, dot);
      out += "\n[" + section + "]\n";
    }
    out += "# " + field.help + "\n";
    out += field.path.substr(dot + 1) + " = " + toml_value(field, get_field(config, field.path)) + "\n";
  }
  return out;
}

}  // namespace titan::config
