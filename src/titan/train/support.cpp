#include "titan/train/support.h"

#include "titan/config/config_error.h"
#include "titan/core/error.h"
#include "titan/plugins/plugin_loader.h"
#include "titan/train/job.h"

namespace titan::train {

JobFeatures job_features(const config::JobConfig& c, const nn::DecoderConfig* model) {
  JobFeatures f;
  f.tp = c.parallelism.tensor_parallel_degree;
  f.ep = c.parallelism.expert_parallel_degree;
  f.pp = c.parallelism.pipeline_parallel_degree;
  f.lora_rank = c.lora.rank;
  f.lora_dropout = c.lora.dropout;
  f.base_quantization = c.lora.base_quantization;
  f.plugin_overrides = !plugins::split_imports(c.overrides.imports).empty();
  f.model_label = model_label(c);
  if (model != nullptr) {
    f.model_known = true;
    f.tied_embeddings = model->tie_embeddings;
  }
  return f;
}

const std::vector<SupportRule>& support_matrix() {
  static const std::vector<SupportRule> rules = {
      {"LoRA", "pipeline parallelism", "adapters are not placed on stages", false,
       [](const JobFeatures& j) { return j.lora_rank > 0 && j.pp > 1; },
       [](const JobFeatures& j) {
         return str("lora.rank=", j.lora_rank, " with parallelism.pipeline_parallel_degree=", j.pp,
                    ": LoRA is not pipelined yet; use data_parallel_shard_degree (FSDP) instead");
       }},
      {"quantized LoRA base", "tensor parallelism", "TP would cut a quantized weight's blocks", false,
       [](const JobFeatures& j) { return j.base_quantization != "none" && j.tp > 1; },
       [](const JobFeatures& j) {
         return str("lora.base_quantization=", j.base_quantization, " with parallelism.tensor_parallel_degree=", j.tp,
                    ": a quantized base is not tensor-parallel; use data_parallel_shard_degree (FSDP) instead");
       }},
      {"LoRA dropout", "tensor parallelism", "a row-parallel adapter's input is split over the ranks", false,
       [](const JobFeatures& j) { return j.lora_rank > 0 && j.lora_dropout > 0.0 && j.tp > 1; },
       [](const JobFeatures& j) {
         return str("lora.dropout=", j.lora_dropout, " with parallelism.tensor_parallel_degree=", j.tp,
                    ": LoRA dropout is not tensor-parallel yet; use data_parallel_shard_degree (FSDP) or lora.dropout 0");
       }},
      {"LoRA", "expert parallelism", "adapters on experts are not exchanged", false,
       [](const JobFeatures& j) { return j.lora_rank > 0 && j.ep > 1; },
       [](const JobFeatures& j) {
         return str("lora.rank=", j.lora_rank, " with parallelism.expert_parallel_degree=", j.ep,
                    ": LoRA is not expert-parallel yet; use expert_parallel_degree=1");
       }},
      {"expert parallelism", "tensor parallelism", "expert weights are not split over tp", false,
       [](const JobFeatures& j) { return j.ep > 1 && j.tp > 1; },
       [](const JobFeatures& j) {
         return str("parallelism.expert_parallel_degree=", j.ep, " with tensor_parallel_degree=", j.tp,
                    ": mixture-of-experts layers are not tensor-parallel yet; use tensor_parallel_degree=1");
       }},
      {"plugin overrides", "tensor parallelism", "a plugin module's weights have no TP placement", false,
       [](const JobFeatures& j) { return j.plugin_overrides && j.tp > 1; },
       [](const JobFeatures&) {
         return std::string("[parallel] plugin overrides are not tensor-parallel yet. HINT: use them with "
                            "data_parallel_shard_degree, or drop override.imports");
       }},
      {"tied embeddings", "pipeline parallelism", "the first and last stages would share one weight", true,
       [](const JobFeatures& j) { return j.tied_embeddings && j.pp > 1; },
       [](const JobFeatures& j) {
         return str("parallelism.pipeline_parallel_degree=", j.pp, ": ", j.model_label,
                    " ties its head to the embedding, which the first and last stages would share; pipeline "
                    "parallelism needs untied embeddings");
       }},
  };
  return rules;
}

void check_supported(const JobFeatures& job) {
  for (const SupportRule& rule : support_matrix()) {
    if (rule.needs_model && !job.model_known) continue;
    if (rule.hits(job)) config::config_fail(rule.error(job));
  }
}

}  // namespace titan::train
