// Resolves a run's config: fn from the registry -> TOML file (job.config_file, from the CLI or set
// by fn) -> CLI flags, later wins.
//
// CLI flags are field paths: "--training.steps 10" or "--training.steps=10"; booleans are
// "--checkpoint.enable" (true), "--no-checkpoint.enable" (false) or "--checkpoint.enable=false" —
// a boolean never takes the next argument as its value, and "--checkpoint.enable false" is an error
// rather than a silent true. A value starting with "--" needs the "=" form.
//
// TOML files have one [section] per JobConfig member and `key = value` per field, exactly what
// to_toml() writes (so `titan train --config X --print-config > my.toml` is a starting point).
// An integer is accepted for a number field (lr = 1); nothing else converts.
#pragma once

#include <string>
#include <vector>

#include "titan/config/job_config.h"  // also declares nearest_field()

namespace titan::config {

struct ResolveResult {
  JobConfig config;
  std::string config_name;                      // the --config value
  bool print_config = false;                    // --print-config was given
  std::vector<std::string> unknown_positional;  // arguments not starting with "--", in order
};

// Resolves the arguments after `titan train`:
//   --config NAME | --config=NAME   required; the registered function to start from (find_config)
//   --job.config_file F             applied FIRST, before every other flag, wherever it appears
//                                   (the last one wins); the TOML file then applies on top of the
//                                   function, and the remaining flags on top of the file
//   --print-config                  sets print_config (the CLI prints to_toml and exits)
//   --<section>.<field> ...         as apply_cli_overrides
// A config file cannot include another: after loading F, job.config_file is F whatever F says.
// Does not validate(): the caller knows the data-parallel degree.
ResolveResult resolve_config(const std::vector<std::string>& args);

// Applies field flags in order (later wins). ConfigError for an unknown field ("unknown config
// field '--training.step'; did you mean --training.steps? (titan train --help lists all)"), a
// missing value, "--no-" on a non-boolean, a value that does not parse, or a positional argument.
JobConfig apply_cli_overrides(JobConfig config, const std::vector<std::string>& args);

// model.hf_path DIR, when set: model.name "" (the shape from DIR/config.json), model.hf_assets_path
// DIR, checkpoint.initial_load_path DIR with initial_load_in_hf — each only where `c` still holds
// `from_function`'s value (the config function's), so a field the job file or a flag gave wins.
void expand_hf_path(JobConfig& c, const JobConfig& from_function);

// Reads `path` and applies it as apply_toml_text (origin = path). ConfigError when the file is
// missing or unreadable.
void apply_toml_file(JobConfig& config, const std::string& path);

// Applies TOML text. ConfigError "<origin>:<line>: ..." for a parse error, an unknown section or
// key (naming the nearest), a key outside any section, or a value of the wrong type. All or
// nothing: on an error `config` is left unchanged.
void apply_toml_text(JobConfig& config, const std::string& text, const std::string& origin);

// Every field under [section] headers, each preceded by a "# help" line; strings quoted and
// escaped, numbers in the shortest form that parses back to the same double. Round-trips through
// apply_toml_text exactly.
std::string to_toml(const JobConfig& config);

}  // namespace titan::config
