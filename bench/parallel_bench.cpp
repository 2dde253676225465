// Multi-rank overhead on this machine: the same job (global batch, steps, model) on 1 rank with
// all cores, and on 2 ranks (FSDP, TP + SP, TP without SP) with the cores split between them; then
// the MoE model (debug_moe) on 1 rank, 2 ranks FSDP and 2 ranks expert-parallel (ep=2),
// through mpirun; per layout the median global tokens/s over the steps after the first, the wall
// time inside collectives, and the bytes each rank passed to collectives per step next to the
// planner's value (train/planner.h: measured on the meta device). On 2 cores absolute scaling is not the point: the
// ratio to the 1-rank run is the price of the communication and the duplicated work.
// Then the pipeline (pp=2, the dense model with --model.n_layers 4 so that Interleaved1F1B holds 2
// stages per rank): GPipe, 1F1B and Interleaved1F1B over M = 8 micro-batches of 1 row, the same
// global batch. For those rows "bubble" is the measured bubble: rank 0's wall seconds inside
// communication (comm_seconds: the pipeline's waits on receives and on its sends, plus FSDP's
// gathers over its 1-rank group and the loss's reduction over pp) over the step's wall seconds, median over
// the steps after the first; "ideal" is the schedule's (pp - 1) / (V M + pp - 1)
// (parallel/pipeline_schedule.h, pipeline_bubble_fraction). The measured figure also holds the
// imbalance between stages (stage 0 holds the embedding, the last stage the head and the loss).
//   build/bench/parallel_bench [--steps 12] [--model.n_layers 4] [other titan train flags]
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "titan/config/overrides.h"
#include "titan/config/validate.h"
#include "titan/models/builtin.h"
#include "titan/train/job.h"
#include "titan/train/planner.h"
#include "titan/train/trainer.h"

namespace fs = std::filesystem;
using titan::bench::fixed;
using titan::bench::median;

namespace {

struct Layout {
  const char* name;
  int ranks;
  int64_t tp;
  const char* flags;
  int64_t ep = 1;
  bool moe = false;  // debug_moe instead of the dense model; "vs 1 rank" against the 1-rank MoE run
  int64_t pp = 1;    // pipeline degree; V stages per rank, M micro-batches
  int64_t v = 1;
  int64_t m = 1;
};

int run(const std::string& cmd) {
  std::fflush(stdout);
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  titan::models::register_config_functions();
  std::string extra;
  std::vector<std::string> flags;
  for (int i = 1; i < argc; ++i) {
    extra += std::string(" ") + argv[i];
    flags.emplace_back(argv[i]);
  }
  const fs::path dir = fs::temp_directory_path() / ("titan_parallel_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string titan = TITAN_BINARY;
  if (run(titan + " train-tokenizer --dataset quickstart --vocab-size 2048 --out " + (dir / "tok").string() +
          " > /dev/null 2>&1") != 0) {
    std::fprintf(stderr, "parallel_bench: train-tokenizer failed\n");
    return 1;
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string base = " train --config qwen3_debug --training.steps 12 --metrics.log_freq 1 --training.seq_len 256 "
                           "--lr_scheduler.warmup_steps 2 --metrics.peak_tflops 1 --model.hf_assets_path " +
                           (dir / "tok").string() + extra;
  const Layout layouts[] = {{"1 rank", 1, 1, ""},
                            {"2 ranks, FSDP", 2, 1, ""},
                            {"2 ranks, TP + SP", 2, 2, " --parallelism.tensor_parallel_degree 2"},
                            {"2 ranks, TP, no SP", 2, 2,
                             " --parallelism.tensor_parallel_degree 2 --no-parallelism.enable_sequence_parallel"},
                            {"MoE 1 rank", 1, 1, " --model.name debug_moe", 1, true},
                            {"MoE 2 ranks, FSDP", 2, 1, " --model.name debug_moe", 1, true},
                            {"MoE 2 ranks, ep=2", 2, 1, " --model.name debug_moe --parallelism.expert_parallel_degree 2",
                             2, true},
                            {"PP 1 rank", 1, 1, " --model.n_layers 4", 1, false},
                            {"PP 2, GPipe", 2, 1,
                             " --model.n_layers 4 --parallelism.pipeline_parallel_degree 2"
                             " --parallelism.pipeline_parallel_schedule GPipe",
                             1, false, 2, 1, 8},
                            {"PP 2, 1F1B", 2, 1,
                             " --model.n_layers 4 --parallelism.pipeline_parallel_degree 2"
                             " --parallelism.pipeline_parallel_schedule 1F1B",
                             1, false, 2, 1, 8},
                            {"PP 2, Interleaved", 2, 1,
                             " --model.n_layers 4 --parallelism.pipeline_parallel_degree 2"
                             " --parallelism.pipeline_parallel_schedule Interleaved1F1B"
                             " --parallelism.pipeline_parallel_layers_per_stage 1",
                             1, false, 2, 2, 8}};
  titan::bench::Table table({{"layout", -20}, {"tok/s", 8}, {"vs 1 rank", 10}, {"comm s/step", 12},
                             {"comm MB/step", 13}, {"planner MB", 11}, {"loss@12", 9},
                             {"bubble", 7}, {"ideal", 6}});
  table.print_header();
  double one_rank = 0;
  for (const Layout& l : layouts) {
    const fs::path dump = dir / std::to_string(&l - layouts);
    const int64_t dp = l.ranks / (l.tp * l.pp);
    const int64_t local = 8 / dp;  // global batch 8 rows
    const std::string args = base + " --training.local_batch_size " + std::to_string(local) + " --job.dump_folder " +
                             dump.string() + l.flags;
    const std::string cmd =
        l.ranks == 1 ? "OMP_NUM_THREADS=" + std::to_string(cores) + " " + titan + args
                     : titan + " launch --nproc-per-node " + std::to_string(l.ranks) + " --" + args;
    if (run(cmd + " > " + (dump.string() + ".log") + " 2>&1") != 0) {
      std::fprintf(stderr, "parallel_bench: %s failed; see %s.log\n", l.name, dump.string().c_str());
      return 1;
    }
    std::vector<double> tps, comm_s, bubble;
    double comm_bytes = 0, loss = 0;
    std::ifstream in(dump / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json row = nlohmann::json::parse(line);
      if (row.contains("kind")) continue;  // a validation row, not a training step
      loss = row["loss"].get<double>();
      if (row["step"].get<int64_t>() == 1) continue;  // warm-up
      tps.push_back(row["tokens"].get<double>() * static_cast<double>(dp) / row["seconds"].get<double>());
      comm_s.push_back(row.value("comm_seconds", 0.0));
      bubble.push_back(row.value("comm_seconds", 0.0) / row["seconds"].get<double>());
      comm_bytes = row.value("comm_bytes", 0.0);
    }
    // The planner's figure for this layout.
    std::vector<std::string> plan_args = {"--config", "qwen3_debug", "--training.seq_len", "256"};
    if (l.moe) plan_args.insert(plan_args.end(), {"--model.name", "debug_moe"});
    plan_args.insert(plan_args.end(), flags.begin(), flags.end());
    const titan::config::JobConfig c = titan::config::resolve_config(plan_args).config;
    const titan::models::ResolvedModel model = titan::train::resolve_model(c);
    double planned = 0;
    for (const titan::train::LayoutPlan& p :
         titan::train::plan_layouts(c, model, titan::train::job_tree(c, model), l.ranks, 0)) {
      if (p.tp == l.tp && p.ep == l.ep) planned = p.comm_bytes;
    }
    const double t = median(tps);
    if (l.ranks == 1) one_rank = t;
    const bool piped = l.pp > 1;
    const double ideal = static_cast<double>(l.pp - 1) / static_cast<double>(l.v * l.m + l.pp - 1);
    table.print_row({l.name, fixed(t, 0), fixed(t / one_rank, 2), fixed(median(comm_s), 3), fixed(comm_bytes / 1e6, 2),
                     fixed(planned / 1e6, 2), fixed(loss, 4), piped ? fixed(median(bubble), 3) : "-",
                     piped ? fixed(ideal, 3) : "-"});
  }
  fs::remove_all(dir);
  return 0;
}
