// The support matrix (train/support.h): each rule hits exactly its two features, and its error is the
// one-line config error titan train gives.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/op_harness.h"
#include "titan/config/config_error.h"
#include "titan/train/support.h"

namespace titan::train {
namespace {

// A job with every feature off, one rank per dimension, model known and dense.
JobFeatures plain() {
  JobFeatures j;
  j.model_known = true;
  j.model_label = "model 'debug'";
  return j;
}

// The rules `j` hits, as "first with second".
std::vector<std::string> hits(const JobFeatures& j) {
  std::vector<std::string> out;
  for (const SupportRule& r : support_matrix()) {
    if (r.hits(j)) out.push_back(std::string(r.first) + " with " + r.second);
  }
  return out;
}

TEST(SupportMatrix, EachRuleHitsExactlyItsCombination) {
  EXPECT_TRUE(hits(plain()).empty());
  struct Case {
    void (*set)(JobFeatures&);
    std::string rule;
  };
  const std::vector<Case> cases = {
      {[](JobFeatures& j) { j.lora_rank = 8, j.pp = 2; }, "LoRA with pipeline parallelism"},
      {[](JobFeatures& j) { j.base_quantization = "nf4", j.tp = 2; }, "quantized LoRA base with tensor parallelism"},
      {[](JobFeatures& j) { j.lora_rank = 8, j.lora_dropout = 0.1, j.tp = 2; }, "LoRA dropout with tensor parallelism"},
      {[](JobFeatures& j) { j.lora_rank = 8, j.ep = 2; }, "LoRA with expert parallelism"},
      {[](JobFeatures& j) { j.ep = 2, j.tp = 2; }, "expert parallelism with tensor parallelism"},
      {[](JobFeatures& j) { j.plugin_overrides = true, j.tp = 2; }, "plugin overrides with tensor parallelism"},
      {[](JobFeatures& j) { j.tied_embeddings = true, j.pp = 2; }, "tied embeddings with pipeline parallelism"},
  };
  ASSERT_EQ(cases.size(), support_matrix().size());
  for (const Case& c : cases) {
    JobFeatures j = plain();
    c.set(j);
    EXPECT_EQ(hits(j), std::vector<std::string>{c.rule});
  }
  // Each feature alone runs.
  for (void (*set)(JobFeatures&) :
       {+[](JobFeatures& j) { j.lora_rank = 8; }, +[](JobFeatures& j) { j.tp = 4; },
        +[](JobFeatures& j) { j.ep = 4; }, +[](JobFeatures& j) { j.pp = 4; },
        +[](JobFeatures& j) { j.plugin_overrides = true; }, +[](JobFeatures& j) { j.tied_embeddings = true; },
        +[](JobFeatures& j) { j.base_quantization = "int8"; }, +[](JobFeatures& j) { j.lora_rank = 8, j.tp = 2; },
        +[](JobFeatures& j) { j.lora_rank = 8, j.lora_dropout = 0.1; }}) {
    JobFeatures j = plain();
    set(j);
    EXPECT_TRUE(hits(j).empty());
  }
}

TEST(SupportMatrix, CheckGivesTheRulesOneLineConfigErrorAndWaitsForTheModel) {
  JobFeatures j = plain();
  j.lora_rank = 4;
  j.lora_dropout = 0.1;
  j.tp = 2;
  bool config_error = false;
  try {
    check_supported(j);
  } catch (const config::ConfigError& e) {
    config_error = true;
    EXPECT_EQ(std::string(e.what()), "lora.dropout=0.1 with parallelism.tensor_parallel_degree=2: LoRA dropout is not "
                                     "tensor-parallel yet; use data_parallel_shard_degree (FSDP) or lora.dropout 0");
  }
  EXPECT_TRUE(config_error);

  JobFeatures tied = plain();
  tied.tied_embeddings = true;
  tied.pp = 2;
  tied.model_known = false;  // before the model is resolved its facts are not read
  EXPECT_NO_THROW(check_supported(tied));
  tied.model_known = true;
  const std::string message = testing::error_of([&] { check_supported(tied); });
  EXPECT_NE(message.find("parallelism.pipeline_parallel_degree=2: model 'debug' ties its head to the embedding"),
            std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

}  // namespace
}  // namespace titan::train
