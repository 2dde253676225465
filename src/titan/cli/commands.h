// Subcommands. Each returns the process exit code; errors are thrown as titan::Error and
// printed by main as one line.
#pragma once

namespace titan::cli {

int run_demo(int argc, char** argv);
int run_forward(int argc, char** argv);
int run_generate(int argc, char** argv);
int run_tokenize(int argc, char** argv);
int run_train_tokenizer(int argc, char** argv);
int run_train(int argc, char** argv);
int run_configs(int argc, char** argv);
int run_convert(int argc, char** argv);
int run_check_kernels(int argc, char** argv);
int run_launch(int argc, char** argv);
int run_plan(int argc, char** argv);
// Logs the build/run environment: CPU path, GEMM backend, threads, kernels in use.
void log_startup();

}  // namespace titan::cli
