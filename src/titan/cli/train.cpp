// titan train --config NAME [--job.config_file F] [--<section>.<field> VALUE ...] [--print-config]
// titan configs
// The config is resolved (function -> TOML file -> flags) and validated before anything else is
// printed or done, so a config mistake is one line on stderr and exit code 2.
#include <omp.h>

#include <cstdio>
#include <string>
#include <vector>

#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/config/overrides.h"
#include "titan/config/registry.h"
#include "titan/config/validate.h"
#include "titan/core/log.h"
#include "titan/core/parallel.h"
#include "titan/train/trainer.h"

namespace titan::cli {
namespace {

std::string train_usage() {
  std::string u =
      "usage: titan train --config NAME [--job.config_file F] [--<section>.<field> VALUE ...] [--print-config]\n"
      "Trains with the named config function, then the TOML job file, then the flags (later wins).\n"
      "Booleans: --<field> / --no-<field> / --<field>=true|false. --print-config prints the resolved\n"
      "config as TOML and exits.\n\nconfigs:\n";
  for (const config::ConfigEntry& e : config::config_registry()) {
    u += str("  ", e.name, std::string(e.name.size() < 14 ? 14 - e.name.size() : 1, ' '), e.summary, "\n");
  }
  u += "\nfields (default in brackets):\n";
  for (const config::Field& f : config::job_config_fields()) {
    u += str("  --", f.path, " ", config::field_type_name(f.type), " [", f.default_value, "]\n      ", f.help, "\n");
  }
  return u;
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

int run_train(int argc, char** argv) {
  const std::vector<std::string> args(argv + 2, argv + argc);
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
  const config::JobConfig& c = resolved.config;
  config::validate(c, /*data_parallel_degree=*/1);
  if (resolved.print_config) {
    std::fputs(config::to_toml(c).c_str(), stdout);
    return 0;
  }
  if (c.training.deterministic) {
    // titan's CPU kernels reduce in a fixed order for a given thread count; keep that count fixed.
    omp_set_dynamic(0);
  }
  log_startup();
  train::run_training(c, resolved.config_name);
  return 0;
}

}  // namespace titan::cli
