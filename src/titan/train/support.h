// The support matrix: the one list of feature combinations titan does not run yet ("X with Y").
// Each rule names its two features, says why, and, when a job hits it, gives the one-line config
// error (exit 2, before any work) with the way out. titan train checks it where the facts are
// known (the config's degrees first, the model's facts once it is resolved); `titan plan` prints
// the table with the rules this config hits. A family's own limits (which parameters its TP plan
// can split) stay in its plan (models/decoder/parallel_plan.cpp).
//
// Adding a combination that works means deleting its rule here, with the test that trains it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/config/job_config.h"
#include "titan/nn/decoder.h"

namespace titan::train {

// What the rules read: a job's parallel degrees and features, and (model_known) its model's facts.
struct JobFeatures {
  int64_t tp = 1, ep = 1, pp = 1;
  int64_t lora_rank = 0;
  double lora_dropout = 0.0;
  std::string base_quantization = "none";  // lora.base_quantization
  bool plugin_overrides = false;  // override.imports set
  bool model_known = false;
  bool tied_embeddings = false;
  std::string model_label;         // "model 'debug'" (model_label in job.h)
};
// The config's facts (degrees as the config states them); with `model`, its facts too.
JobFeatures job_features(const config::JobConfig& config, const nn::DecoderConfig* model = nullptr);

struct SupportRule {
  const char* first;   // "lora"
  const char* second;  // "pipeline parallelism"
  const char* why;     // what stands in the way, in a few words
  bool needs_model;    // reads the model's facts (checked once the model is resolved)
  bool (*hits)(const JobFeatures& job);
  std::string (*error)(const JobFeatures& job);  // the one-line config error when it hits
};
const std::vector<SupportRule>& support_matrix();

// The first rule `job` hits is a ConfigError (rules that need the model are skipped until
// job.model_known).
void check_supported(const JobFeatures& job);

}  // namespace titan::train
