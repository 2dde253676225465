// titan plan --config NAME --world-size N [--memory-per-rank 24GiB] [--seq-len T]
//            [--local-batch-size B] [--<section>.<field> VALUE ...]
// Prints, for each valid (dp_shard, tp, ep) layout of the job on N ranks (with
// --parallelism.pipeline_parallel_degree: of each pipeline stage's ranks, the rank needing most, and
// the schedule's ideal bubble), the predicted memory per
// rank (parameters, gradients, optimizer state, gathered blocks, activations, logits chunk, backward
// temporaries) and the bytes each rank passes to collectives per step, and recommends the layout
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

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", bytes / double(1 << 30));
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
  train::PlanInput in;
  in.model = train::model_config(c);
  in.world = world;
  in.dp_replicate = c.parallelism.data_parallel_replicate_degree;
  in.seq_len = c.training.seq_len;
  in.local_batch = c.training.local_batch_size;
  in.sequence_parallel = c.parallelism.enable_sequence_parallel;
  in.prefetch = c.parallelism.fsdp_prefetch;
  in.memory_per_rank = memory;
  in.recompute = nn::recompute_per_layer(c.activation_checkpoint.mode, c.activation_checkpoint.selective_ac_option,
                                         in.model.num_layers);
  const train::PrecisionConfig precision = train::resolve_precision(c);
  in.bf16 = precision.param == train::Precision::bfloat16;
  in.bf16_reduce = precision.reduce == train::Precision::bfloat16;
  in.ep = c.parallelism.expert_parallel_degree > 1 ? c.parallelism.expert_parallel_degree : 0;
  // The stages and schedule titan train would run (config errors as there).
  const train::PipelineConfig pipeline = train::resolve_pipeline(c.parallelism, in.model.num_layers, in.local_batch);
  in.schedule = pipeline.schedule;
  in.pipeline = pipeline.layout;
  in.micro_rows = pipeline.micro_rows;
  const std::vector<train::LayoutPlan> plans = train::plan_layouts(in);
  TITAN_CHECK(!plans.empty(), "[plan] no layout of ", world, " ranks with data_parallel_replicate_degree ",
              in.dp_replicate, " fits the model's divisibility (heads ", in.model.num_heads, ", kv heads ",
              in.model.num_kv_heads, ", FFN ", in.model.hidden_dim, ", vocab ", in.model.vocab_size,
              in.ep > 0 ? str(", experts ", in.model.num_experts, " for expert_parallel_degree ", in.ep) : "", ")");
  // A layout titan train would refuse (train/support.h) is shown, marked, and never recommended.
  std::vector<std::string> refused(plans.size());
  int pick = -1;
  for (size_t i = 0; i < plans.size(); ++i) {
    train::JobFeatures job = train::job_features(c, &in.model);
    job.tp = plans[i].tp;
    job.ep = plans[i].ep;
    job.pp = plans[i].pp;
    for (const train::SupportRule& rule : train::support_matrix()) {
      if (refused[i].empty() && rule.hits(job)) refused[i] = str("not run yet: ", rule.first, " with ", rule.second);
    }
    if (pick < 0 && plans[i].fits && refused[i].empty()) pick = static_cast<int>(i);
  }
  const config::ActivationCheckpointSection& ac = c.activation_checkpoint;
  std::printf("plan: %s (%.1fM parameters) on %lld ranks, micro-batch %lld x %lld tokens per data-parallel rank%s, "
              "activation checkpointing %s, %s compute\n",
              resolved.config_name.c_str(), static_cast<double>(in.model.num_params()) / 1e6,
              static_cast<long long>(world), static_cast<long long>(in.local_batch), static_cast<long long>(in.seq_len),
              memory > 0 ? str(", ", gib(memory), " GiB per rank").c_str() : "",
              ac.mode == "selective" ? ("selective " + ac.selective_ac_option).c_str() : ac.mode.c_str(),
              c.training.mixed_precision_param.c_str());
  if (in.pipeline.pp > 1) {
    std::printf("pipeline: %s, %lld micro-batches of %lld rows, ideal bubble %.1f%%; %s\n"
                "(each layout's numbers are those of its pp rank with the largest total: column pp_rank)\n",
                parallel::pipeline_schedule_name(in.schedule), static_cast<long long>(in.local_batch / in.micro_rows),
                static_cast<long long>(in.micro_rows),
                100.0 * parallel::pipeline_bubble_fraction(in.pipeline, in.local_batch / in.micro_rows),
                in.pipeline.describe().c_str());
  }
  std::printf("GiB per rank: params grads optim = parameters, gradients, AdamW moments (this rank's shard);\n"
              "gathered = FSDP's full blocks in use; activ = saved activations; logits = the head's chunk\n"
              "(with bf16 compute also the head weight's bf16 copy);\n"
              "temp = backward temporaries; comm = GB passed to collectives per step per rank\n"
              "(a2a: of which expert parallelism's all-to-all)\n\n");
  const bool pp = in.pipeline.pp > 1;
  std::printf("%-3s %s%-12s %4s %4s %4s %8s %8s %8s %8s %8s %8s %8s %9s %8s %8s  %s\n", "", pp ? "pp pp_rank " : "",
              "dp_replicate", "shard", "tp", "ep", "params", "grads", "optim", "gathered", "activ", "logits", "temp",
              "total", "comm", "a2a", "");
  for (size_t i = 0; i < plans.size(); ++i) {
    const train::LayoutPlan& p = plans[i];
    const std::string pp_columns = pp ? str(p.pp, std::string(p.pp < 10 ? 2 : 1, ' '), p.pp_rank,
                                            std::string(p.pp_rank < 10 ? 7 : 6, ' '))
                                      : std::string();
    std::printf("%-3s %s%-12lld %4lld %4lld %4lld %8s %8s %8s %8s %8s %8s %8s %9s %8.2f %8.2f  %s\n",
                static_cast<int>(i) == pick ? "->" : "", pp_columns.c_str(), static_cast<long long>(p.dp_replicate),
                static_cast<long long>(p.dp_shard), static_cast<long long>(p.tp), static_cast<long long>(p.ep),
                gib(p.parameters).c_str(),
                gib(p.gradients).c_str(), gib(p.optimizer).c_str(), gib(p.gathered).c_str(),
                gib(p.activations).c_str(), gib(p.logits).c_str(), gib(p.transient).c_str(), gib(p.total).c_str(),
                p.comm_bytes / 1e9, p.all_to_all_bytes / 1e9, !refused[i].empty() ? refused[i].c_str()
                                                              : p.fits ? "" : "does not fit");
  }
  print_support_matrix(c, in.model);
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
