// titan: the command-line entry point. Only this layer prints errors and exits.
#include <cstdio>
#include <cstring>
#include <string>

#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/parallel/comm.h"
#include "titan/config/config_error.h"
#include "titan/models/builtin.h"
#include "titan/core/error.h"
#include "titan/core/openmp_env.h"
#include "titan/core/parallel.h"
#include "titan/train/stop_signal.h"

namespace {

const char* kUsage =
    "usage: titan <command> [flags]\n"
    "commands:\n"
    "  train     train a model from a named config function + TOML job file + --section.field flags\n"
    "  configs   list the registered config functions\n"
    "  convert   native checkpoint <-> Hugging Face folder (config.json + safetensors), offline\n"
    "  check-kernels  run plugin kernels (--override.imports) against the built-in references,\n"
    "            forward and backward; print the errors per tensor\n"
    "  demo      forward+backward of a model spec on random weights and tokens; prints loss,\n"
    "            gradient norm, tokens/s and the kernels in use\n"
    "  forward   run a Hugging Face model folder on given tokens; write logits, loss, gradients\n"
    "  generate  continue prompts (text or token ids) with a KV cache: greedy or sampled\n"
    "  tokenize  encode JSONL text (or decode ids) with a Hugging Face tokenizer.json\n"
    "  launch    start a multi-rank job through mpirun (torchrun-like): titan launch --nproc-per-node N -- train ...\n"
    "  plan      per-rank memory and communication of each (dp_shard, tp) layout; recommends one\n"
    "  train-tokenizer  train a byte-level BPE tokenizer (Qwen3 pre-tokenizer) on text files;\n"
    "            write tokenizer.json + tokenizer_config.json\n"
    "  version   print the version\n"
    "Run 'titan <command> --help' for the flags of a command.\n";

// One line on stderr; in a multi-rank job it names the rank, and the whole job is taken down
// (MPI_Abort) rather than left waiting for this rank in a collective. Under titan launch the line
// and the code also go to TITAN_LAUNCH_ERRORS/rank<r>.error, so that launch can repeat them as
// its last line (after mpirun's own report) and exit with the rank's code.
int fail(int code, const char* kind, const char* what) {
  const titan::parallel::LaunchInfo launch = titan::parallel::launch_info();
  if (launch.world > 1) {
    const std::string line = titan::str("titan: ", kind, ": [rank ", launch.rank, " of ", launch.world, "] ", what);
    std::fprintf(stderr, "%s\n", line.c_str());
    titan::parallel::record_launch_error(launch.rank, code, line);
    titan::parallel::abort_world(code);
  } else {
    std::fprintf(stderr, "titan: %s: %s\n", kind, what);
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  titan::reexec_with_openmp_wait_default(argv);  // before anything: the process may start again
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  // Before any thread starts (plugins, OpenMP, MPI, the data loader): see stop_signal.h.
  if (command == "train") titan::train::take_stop_signals_on_own_thread();
  try {
    titan::apply_default_num_threads();
    titan::models::register_config_functions();  // the model families' config functions, then plugins'
    if (command == "train") return titan::cli::run_train(argc, argv);
    if (command == "configs") return titan::cli::run_configs(argc, argv);
    if (command == "convert") return titan::cli::run_convert(argc, argv);
    if (command == "launch") return titan::cli::run_launch(argc, argv);
    if (command == "plan") return titan::cli::run_plan(argc, argv);
    if (command == "check-kernels") return titan::cli::run_check_kernels(argc, argv);
    if (command == "demo") return titan::cli::run_demo(argc, argv);
    if (command == "forward") return titan::cli::run_forward(argc, argv);
    if (command == "generate") return titan::cli::run_generate(argc, argv);
    if (command == "tokenize") return titan::cli::run_tokenize(argc, argv);
    if (command == "train-tokenizer") return titan::cli::run_train_tokenizer(argc, argv);
    if (command == "version" || command == "--version") {
      std::printf("titan 0.1.0\n");
      return 0;
    }
    std::fprintf(stderr, "titan: unknown command '%s'\n%s", command.c_str(), kUsage);
    return 2;
  } catch (const titan::train::Interrupted& e) {  // every rank stopped at the same step: no abort
    if (titan::parallel::launch_info().rank == 0) std::fprintf(stderr, "titan: %s\n", e.what());
    return 128 + e.signal();
  } catch (const titan::config::ConfigError& e) {
    return fail(2, "error", e.what());
  } catch (const titan::cli::UsageError& e) {
    return fail(2, "error", e.what());
  } catch (const titan::Error& e) {
    return fail(1, "error", e.what());
  } catch (const std::exception& e) {
    return fail(1, "internal error", e.what());
  }
}
