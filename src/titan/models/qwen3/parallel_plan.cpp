#include "titan/models/qwen3/parallel_plan.h"

#include "titan/core/error.h"

namespace titan::qwen3 {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

int tp_split_dim(const std::string& fqn) {
  for (const char* col : {"attention.wq.weight", "attention.wk.weight", "attention.wv.weight", "attention.wq.bias",
                          "attention.wk.bias", "attention.wv.bias", "feed_forward.w1.weight", "feed_forward.w3.weight",
                          "feed_forward.w1.bias", "feed_forward.w3.bias"}) {
    if (ends_with(fqn, col)) return 0;
  }
  if (fqn == "tok_embeddings.weight" || fqn == "output.weight") return 0;
  if (ends_with(fqn, "attention.wo.weight") || ends_with(fqn, "feed_forward.w2.weight")) return 1;
  if (ends_with(fqn, "norm.weight")) return -1;
  TITAN_FAIL("[parallel] ", fqn, " has no tensor-parallel placement (mixture-of-experts layers and row-parallel "
             "biases are not tensor-parallel yet). HINT: use parallelism.tensor_parallel_degree = 1 for this model");
}

bool tp_grad_is_partial(const std::string& fqn, bool sequence_parallel) {
  if (tp_split_dim(fqn) >= 0) return false;
  return sequence_parallel || ends_with(fqn, "q_norm.weight") || ends_with(fqn, "k_norm.weight");
}

}  // namespace titan::qwen3
