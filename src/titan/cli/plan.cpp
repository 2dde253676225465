// titan plan --config NAME --world-size N [--memory-per-rank 24GiB] [--seq-len T]
//            [--local-batch-size B] [--<section>.<field> VALUE ...]
// Prints, for each valid (dp_shard, tp, ep) layout of the job on N ranks (with
// --parallelism.pipeline_parallel_degree: of each pipeline stage's ranks, the rank needing most, and
// the schedule's ideal bubble), the memory per rank measured on the meta device (train/planner.h:
// parameters with gradients, optimizer state, the step's peak) and the bytes each rank passes to
// collectives per step, and recommends the layout
// the seed's rule picks: shard first, add tensor parallelism only when a layout does not fit. For
// a MoE model every expert_parallel_degree dividing dp_shard and num_experts is a layout (or the
// one --parallelism.expert_parallel_degree names), with its all-to-all volume.
// The config resolves as titan train resolves it (so --parallelism.* and --training.* apply).
#include <cstdio>
#include <string>
#include <vector>

#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/config/config_error.h"
#include "titan/config/overrides.h"
#include "titan/config/validate.h"
#include "titan/core/error.h"
#include "titan/models/decoder/parallelize.h"
#include "titan/parallel/pipeline_schedule.h"
#include "titan/train/planner.h"
#include "titan/train/support.h"
#include "titan/train/trainer.h"

namespace titan::cli {
namespace {

constexpr const char* kPlanUsage =
    "usage: titan plan --config NAME --world-size N [--memory-per-rank 24GiB] [--seq-len T]\n"
    "                  [--local-batch-size B] [--<section>.<field> VALUE ...]\n"
    "Predicts per-rank memory and communication of every valid (dp_shard, tp) layout on N ranks and\n"
    "recommends one (shard first; tensor parallelism only when needed). Other flags are titan train's.\n";

std::string gib(double bytes) {  // four significant digits: 0.2218, 12.35
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", bytes / double(1 << 30));
  return text;
}

int64_t positive(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || x < 1) {
    throw UsageError(str("titan plan: ", flag, " '", v, "' is not a positive integer"));
  }
  return x;
}

// The support matrix (train/support.h): every combination titan does not run yet, marked where
// this config (its own degrees and model) hits it.
void print_support_matrix(const config::JobConfig& c, const nn::DecoderConfig& model) {
  const train::JobFeatures job = train::job_features(c, &model);
  std::printf("\nnot combined yet (titan train refuses these; * = this config, with its own degrees):\n");
  for (const train::SupportRule& rule : train::support_matrix()) {
    std::printf("  %s %s with %s: %s\n", rule.hits(job) ? "*" : " ", rule.first, rule.second, rule.why);
  }
}

}  // namespace

int run_plan(int argc, char** argv) {
  std::vector<std::string> args(argv + 2, argv + argc), rest;
  int64_t world = 0;
  double memory = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kPlanUsage, stdout);
      return 0;
    }
    const auto value = [&]() -> std::string {
      if (i + 1 == args.size()) throw UsageError(str("titan plan: ", a, " needs a value\n", kPlanUsage));
      return args[++i];
    };
    if (a == "--world-size") {
      world = positive(a, value());
      // The planner builds and measures every layout of the world: past a million ranks (beyond
      // any machine built) that is hours of work and counts that overflow.
      constexpr int64_t kMaxWorld = int64_t{1} << 20;
      if (world > kMaxWorld) {
        throw UsageError(str("titan plan: --world-size ", world, " is more than ", kMaxWorld,
                             " ranks. HINT: pass the number of ranks (processes) of the job"));
      }
    } else if (a == "--memory-per-rank") {
      const std::string v = value();
      memory = static_cast<double>(config::parse_byte_size(v));
      if (memory <= 0) throw UsageError(str("titan plan: --memory-per-rank '", v, "' is not a size (24GiB, 500MB, ...)"));
    } else if (a == "--seq-len") {
      rest.insert(rest.end(), {"--training.seq_len", value()});
    } else if (a == "--local-batch-size") {
      rest.insert(rest.end(), {"--training.local_batch_size", value()});
    } else {
      rest.push_back(a);
    }
  }
  if (world == 0) throw UsageError(str("titan plan: --world-size is required\n", kPlanUsage));
  const config::ResolveResult resolved = config::resolve_config(rest);
  if (!resolved.unknown_positional.empty()) {
    throw UsageError(str("titan plan: unexpected argument '", resolved.unknown_positional.front(), "'"));
  }
  const config::JobConfig& c = resolved.config;
  config::validate(c, /*data_parallel_degree=*/1);  // as titan train checks it, before any layout is built
  const models::ResolvedModel model = train::resolve_model(c);
  const nn::DecoderConfig& mc = model.config;
  const nn::ConfigTree tree = train::job_tree(c, model);
  const std::vector<train::LayoutPlan> plans = train::plan_layouts(c, model, tree, world, memory);
  const config::ParallelismSection& ps = c.parallelism;
  TITAN_CHECK(!plans.empty(), "[plan] no layout of ", world, " ranks with data_parallel_replicate_degree ",
              ps.data_parallel_replicate_degree, " fits the model's divisibility (heads ", mc.num_heads, ", kv heads ",
              mc.num_kv_heads, ", FFN ", mc.hidden_dim, ", vocab ", mc.vocab_size,
              ps.expert_parallel_degree > 1
                  ? str(", experts ", mc.num_experts, " for expert_parallel_degree ", ps.expert_parallel_degree)
                  : "",
              ")");
  const int pick = train::recommended_layout(plans);
  const config::ActivationCheckpointSection& ac = c.activation_checkpoint;
  const int64_t B = c.training.local_batch_size, T = c.training.seq_len;
  std::printf("plan: %s (%.1fM parameters) on %lld ranks, micro-batch %lld x %lld tokens per data-parallel rank%s, "
              "activation checkpointing %s, %s compute\n",
              resolved.config_name.c_str(), static_cast<double>(mc.num_params()) / 1e6, static_cast<long long>(world),
              static_cast<long long>(B), static_cast<long long>(T),
              memory > 0 ? str(", ", gib(memory), " GiB per rank").c_str() : "",
              ac.mode == "selective" ? ("selective " + ac.selective_ac_option).c_str() : ac.mode.c_str(),
              c.training.mixed_precision_param.c_str());
  const bool pp = ps.pipeline_parallel_degree > 1;
  if (pp) {
    const train::PipelineConfig pipeline = train::resolve_pipeline(ps, mc.num_layers, B);
    std::printf("pipeline: %s, %lld micro-batches of %lld rows, ideal bubble %.1f%%; %s\n"
                "(each layout's numbers are those of its pp rank with the largest total: column pp_rank)\n",
                parallel::pipeline_schedule_name(pipeline.schedule), static_cast<long long>(B / pipeline.micro_rows),
                static_cast<long long>(pipeline.micro_rows), 100.0 * plans.front().bubble,
                pipeline.layout.describe().c_str());
  }
  std::printf("Measured on the meta device (the job's model and one step, no values): GiB per rank as the\n"
              "allocator counts them. params = parameters, gradients and buffers of this rank's share;\n"
              "optim = AdamW moments; step = what the step adds at its peak (gathered FSDP units, saved\n"
              "activations, logits chunk, temporaries); total = the step's peak (the metrics' memory);\n"
              "comm = GB passed to collectives per step per rank (a2a: of which expert parallelism's)\n\n");
  std::printf("%-3s %s%-12s %4s %4s %4s %8s %8s %8s %9s %8s %8s  %s\n", "", pp ? "pp pp_rank " : "", "dp_replicate",
              "shard", "tp", "ep", "params", "optim", "step", "total", "comm", "a2a", "");
  for (size_t i = 0; i < plans.size(); ++i) {
    const train::LayoutPlan& p = plans[i];
    const std::string pp_columns = pp ? str(p.pp, std::string(p.pp < 10 ? 2 : 1, ' '), p.pp_rank,
                                            std::string(p.pp_rank < 10 ? 7 : 6, ' '))
                                      : std::string();
    if (!p.refused.empty()) {
      std::printf("%-3s %s%-12lld %4lld %4lld %4lld  %s\n", "", pp_columns.c_str(),
                  static_cast<long long>(p.dp_replicate), static_cast<long long>(p.dp_shard),
                  static_cast<long long>(p.tp), static_cast<long long>(p.ep), p.refused.c_str());
      continue;
    }
    std::printf("%-3s %s%-12lld %4lld %4lld %4lld %8s %8s %8s %9s %8.2f %8.2f  %s\n",
                static_cast<int>(i) == pick ? "->" : "", pp_columns.c_str(), static_cast<long long>(p.dp_replicate),
                static_cast<long long>(p.dp_shard), static_cast<long long>(p.tp), static_cast<long long>(p.ep),
                gib(p.parameters).c_str(), gib(p.optimizer).c_str(), gib(p.step).c_str(), gib(p.total).c_str(),
                p.comm_bytes / 1e9, p.all_to_all_bytes / 1e9, p.fits ? "" : "does not fit");
  }
  print_support_matrix(c, mc);
  if (pick < 0) {
    std::printf("\nno layout that titan trains fits in %s GiB per rank. HINT: more ranks, --activation_checkpoint.mode full, or a smaller "
                "training.local_batch_size or seq_len\n", gib(memory).c_str());
    return 1;
  }
  const train::LayoutPlan& p = plans[static_cast<size_t>(pick)];
  std::printf("\nrecommended: %s--parallelism.data_parallel_replicate_degree %lld "
              "--parallelism.data_parallel_shard_degree %lld --parallelism.tensor_parallel_degree %lld%s\n",
              pp ? str("--parallelism.pipeline_parallel_degree ", p.pp, " ").c_str() : "",
              static_cast<long long>(p.dp_replicate), static_cast<long long>(p.dp_shard), static_cast<long long>(p.tp),
              p.ep > 1 ? str(" --parallelism.expert_parallel_degree ", p.ep).c_str() : "");
  return 0;
}

}  // namespace titan::cli
