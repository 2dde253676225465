// titan train [--module LIB.so] --config NAME [--job.config_file F] [--<section>.<field> VALUE ...] [--print-config]
// titan configs
// The config is resolved (function -> TOML file -> flags) and validated before anything else is
// printed or done, so a config mistake is one line on stderr and exit code 2.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "titan/checkpoint/gguf.h"
#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/config/config_error.h"
#include "titan/config/overrides.h"
#include "titan/config/registry.h"
#include "titan/config/validate.h"
#include "titan/core/log.h"
#include "titan/core/parallel.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/gguf_model.h"
#include "titan/parallel/comm.h"
#include "titan/plugins/plugin_loader.h"
#include "titan/train/support.h"
#include "titan/train/trainer.h"

namespace titan::cli {
namespace {

std::string train_usage() {
  std::string u =
      "usage: titan train [--module LIB.so] --config NAME [--job.config_file F] [--<section>.<field> VALUE ...]\n"
      "                   [--print-config]\n"
      "Trains with the named config function, then the TOML job file, then the flags (later wins).\n"
      "Booleans: --<field> / --no-<field> / --<field>=true|false. --print-config prints the resolved\n"
      "config as TOML and exits. --module loads plugins whose config functions --config can name.\n\nconfigs:\n";
  for (const config::ConfigEntry& e : config::config_registry()) {
    u += str("  ", e.name, std::string(e.name.size() < 14 ? 14 - e.name.size() : 1, ' '), e.summary, "\n");
  }
  u += "\nfields (default in brackets):\n";
  for (const config::Field& f : config::job_config_fields()) {
    u += str("  --", f.path, " ", config::field_type_name(f.type), " [", f.default_value, "]\n      ", f.help, "\n");
  }
  return u;
}

// A rank of a multi-rank job tags its lines; titan launch passes the console's rank filter
// (local ranks) and the tee folder in the environment.
void configure_rank_logging() {
  const parallel::LaunchInfo launch = parallel::launch_info();
  if (launch.world <= 1) return;
  bool console = true;
  if (const char* f = std::getenv("TITAN_LOCAL_RANKS_FILTER"); f != nullptr && *f != '\0') {
    console = false;
    for (const std::string& r : plugins::split_imports(f)) console = console || r == std::to_string(launch.local_rank);
  }
  std::string tee;
  if (const char* d = std::getenv("TITAN_TEE_DIR"); d != nullptr && *d != '\0') tee = str(d, "/rank", launch.rank, ".log");
  set_log_rank(launch.rank, launch.world, console, tee);
}

}  // namespace

int run_configs(int argc, char** argv) {
  if (argc > 2) {
    throw UsageError(str("titan configs takes no arguments, got '", argv[2], "'"));
  }
  for (const config::ConfigEntry& e : config::config_registry()) {
    std::printf("%-14s %s\n", e.name.c_str(), e.summary.c_str());
  }
  return 0;
}

// --module LIB.so (repeatable, or comma-separated): plugins loaded before the config is resolved,
// so that --config can name the config functions they register. Removed from `args`.
// A GGUF file as checkpoint.initial_load_path loads as a published model (initial_load_in_hf); as
// model.hf_assets_path (what --model.hf_path FILE.gguf sets both to): the folder it stands
// for, less its weights (config.json, tokenizer.json, tokenizer_config.json,
// generation_config.json), is written to <dump folder>/gguf_assets and read from there; the
// weights stay in the file (checkpoint.initial_load_path).
void use_gguf_assets(config::JobConfig& c) {
  // A GGUF file is a published model, never a native checkpoint: its load is the HF-style one.
  if (ckpt::is_gguf_file(c.checkpoint.initial_load_path)) c.checkpoint.initial_load_in_hf = true;
  if (!ckpt::is_gguf_file(c.model.hf_assets_path)) return;
  const std::string dir = (std::filesystem::path(c.job.dump_folder) / "gguf_assets").string();
  std::filesystem::create_directories(dir);
  models::GgufModel::open(c.model.hf_assets_path)->write_assets(dir);
  log_info(str("model ", c.model.hf_assets_path, " (GGUF): its config and tokenizer are in ", dir));
  c.model.hf_assets_path = dir;
}

std::vector<std::string> take_modules(std::vector<std::string>& args) {
  std::vector<std::string> modules, rest;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (args[i] == "--module") {
      if (i + 1 == args.size()) throw UsageError("titan train: --module needs a plugin file. HINT: --module my_configs.so");
      value = args[++i];
    } else if (args[i].rfind("--module=", 0) == 0) {
      value = args[i].substr(9);
    } else {
      rest.push_back(args[i]);
      continue;
    }
    for (const std::string& m : plugins::split_imports(value)) modules.push_back(m);
  }
  args = rest;
  return modules;
}

int run_train(int argc, char** argv) {
  std::vector<std::string> args(argv + 2, argv + argc);
  const std::vector<std::string> modules = take_modules(args);
  if (!modules.empty()) plugins::load_plugins(modules);  // their config functions; overrides stay opt-in
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(train_usage().c_str(), stdout);
      return 0;
    }
  }
  const config::ResolveResult resolved = config::resolve_config(args);
  if (!resolved.unknown_positional.empty()) {
    throw UsageError(str("titan train: unexpected argument '", resolved.unknown_positional.front(),
                         "'. HINT: fields are flags, e.g. --training.steps 10"));
  }
  config::JobConfig c = resolved.config;
  config::validate(c, /*data_parallel_degree=*/1);
  train::check_supported(train::job_features(c));
  if (!c.model.name.empty()) {  // an unknown spec is a config mistake: exit 2, before the banner
    try {
      (void)models::find_size(c.model.name);
    } catch (const Error& e) {
      throw config::ConfigError(e.what());
    }
  }
  if (resolved.print_config) {
    std::fputs(config::to_toml(c).c_str(), stdout);
    return 0;
  }
  if (c.training.deterministic) {
    // titan's CPU kernels reduce in a fixed order for a given thread count; keep that count fixed.
    omp_set_dynamic(0);
  }
  configure_rank_logging();
  log_startup();
  use_gguf_assets(c);
  train::run_training(c, resolved.config_name);
  return 0;
}

}  // namespace titan::cli
