#include "titan/models/decoder/weights.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <set>

#include "titan/checkpoint/hf_folder.h"
#include "titan/checkpoint/json_file.h"
#include "titan/core/progress.h"
#include "titan/core/rng.h"
#include "titan/models/decoder/hf_config.h"
#include "titan/models/decoder/hf_names.h"

namespace titan::models {

// Normal(0, std) truncated to [lo, hi] by redrawing (as trunc_normal_ does, up to its method).
static void fill_trunc_normal(Tensor& t, const Rng& rng, float std, float lo, float hi) {
  float* p = t.data<float>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    float v = std * rng.normal(static_cast<uint64_t>(i));
    for (uint64_t retry = 1; v < lo || v > hi; ++retry) {
      v = std * rng.normal(static_cast<uint64_t>(i) + retry * static_cast<uint64_t>(n));
    }
    p[i] = v;
  }
}

void init_weights(nn::Decoder& model, uint64_t seed) {
  const auto stream = [](const std::string& fqn) { return std::hash<std::string>{}(fqn); };
  for (nn::Parameter* p : model.parameters()) p->value.zero_();

  auto init_linear = [&](nn::Linear& linear, float std) {
    fill_trunc_normal(linear.weight.value, Rng(seed, stream(linear.weight.fqn)), std, -2.0f, 2.0f);
  };
  Progress progress("initializing weights", static_cast<int64_t>(model.layers.size()) + 1, "parts (layers, then embedding and head)");
  for (size_t i = 0; i < model.layers.size(); ++i) {
    progress.advance();
    nn::TransformerBlock& block = *model.layers[i];
    const float depth_std = 0.02f / std::sqrt(2.0f * static_cast<float>(i + 1));
    init_linear(block.attention.wq, 0.02f);
    init_linear(block.attention.wk, 0.02f);
    init_linear(block.attention.wv, 0.02f);
    init_linear(block.attention.wo, depth_std);
    if (block.moe) {
      // torchtitan's MoE init: router and w1 at 0.02, w2/w3 depth-scaled; the bias starts at 0.
      nn::Moe& moe = *block.moe;
      fill_trunc_normal(moe.router.value, Rng(seed, stream(moe.router.fqn)), 0.02f, -2.0f, 2.0f);
      fill_trunc_normal(moe.w1.value, Rng(seed, stream(moe.w1.fqn)), 0.02f, -2.0f, 2.0f);
      fill_trunc_normal(moe.w2.value, Rng(seed, stream(moe.w2.fqn)), depth_std, -2.0f, 2.0f);
      fill_trunc_normal(moe.w3.value, Rng(seed, stream(moe.w3.fqn)), depth_std, -2.0f, 2.0f);
      if (moe.expert_bias.defined()) moe.expert_bias.value.zero_();
    } else {
      // By parameter name, so a plugin's feed-forward (same FQNs, its own layout) inits the same.
      nn::ParameterList ff;
      block.feed_forward->collect(ff);
      for (nn::Parameter* p : ff) {
        if (p->fqn.ends_with(".bias")) continue;  // biases start at 0
        const float std = p->fqn.ends_with(".w1.weight") ? 0.02f : depth_std;
        fill_trunc_normal(p->value, Rng(seed, stream(p->fqn)), std, -2.0f, 2.0f);
      }
    }
    block.attention_norm.weight.value.fill_(1.0f);
    block.ffn_norm.weight.value.fill_(1.0f);
    if (block.attention.q_norm) {
      block.attention.q_norm->weight.value.fill_(1.0f);
      block.attention.k_norm->weight.value.fill_(1.0f);
    }
  }
  model.norm.weight.value.fill_(1.0f);
  const float head_std = 1.0f / std::sqrt(static_cast<float>(model.config().dim));
  nn::Parameter& head = model.head_weight();
  fill_trunc_normal(head.value, Rng(seed, stream(head.fqn)), head_std, -3 * head_std, 3 * head_std);
  if (model.output) {
    nn::Parameter& emb = model.tok_embeddings.weight;
    Rng(seed, stream(emb.fqn)).fill_normal(emb.value.data<float>(), emb.value.numel(), 0.0f, 1.0f);
  }
  progress.advance();
}

nn::DecoderConfig load_hf_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  return config_from_hf(ckpt::read_json_file(path), path);
}

void load_hf_weights(nn::Decoder& model, const std::string& dir) {
  const ckpt::HfWeights weights = ckpt::HfWeights::open(dir);
  std::set<std::string> unused;
  for (const std::string& name : weights.names()) unused.insert(name);

  std::vector<std::string> missing;
  const nn::ParameterList params = model.parameters();
  Progress progress("loading weights from " + dir, static_cast<int64_t>(params.size()), "tensors");
  for (nn::Parameter* p : params) {
    progress.advance();
    for (auto& [hf, dst] : to_hf_tensors(p->fqn, p->value)) {
      const ckpt::TensorInfo* info = weights.find(hf);
      if (info == nullptr) {
        missing.push_back(hf);
        continue;
      }
      TITAN_CHECK(info->shape == dst.shape(), weights.file_of(hf), ": tensor '", hf, "' has shape ",
                  shape_str(info->shape), ", the model expects ", shape_str(dst.shape()),
                  ". HINT: check that config.json matches the weights");
      TITAN_CHECK(info->dtype == DType::f32 || info->dtype == DType::bf16 || info->dtype == DType::f16,
                  weights.file_of(hf), ": tensor '", hf, "' has dtype ", dtype_name(info->dtype),
                  "; weights must be F32, BF16 or F16");
      dst.copy_from(weights.get(hf));  // dst is a view: an expert's slice of a stacked weight
      unused.erase(hf);
    }
  }
  if (model.config().tie_embeddings && unused.count("lm_head.weight")) {
    // Some exports store the tied head anyway; accept it only if it really is the embedding.
    const Tensor head = weights.get("lm_head.weight").to(DType::f32);
    const Tensor& emb = model.tok_embeddings.weight.value;
    TITAN_CHECK(head.shape() == emb.shape() &&
                    std::memcmp(head.raw_data(), emb.raw_data(), emb.nbytes()) == 0,
                weights.file_of("lm_head.weight"), ": config.json ties the embeddings but lm_head.weight ",
                "differs from model.embed_tokens.weight. HINT: set tie_word_embeddings to false");
    unused.erase("lm_head.weight");
  }
  auto join = [](const auto& names) {
    std::string out;
    int shown = 0;
    for (const std::string& n : names) {
      if (shown++ == 8) return out + ", ... (" + std::to_string(names.size()) + " in all)";
      out += (out.empty() ? "" : ", ") + n;
    }
    return out;
  };
  TITAN_CHECK(missing.empty(), dir, ": missing weights for this Qwen3 config: ", join(missing),
              ". HINT: check num_hidden_layers / tie_word_embeddings / attention_bias in config.json");
  TITAN_CHECK(unused.empty(), dir, ": unexpected weights not in this Qwen3 config: ", join(unused),
              ". HINT: check config.json against the checkpoint");
}

std::unique_ptr<nn::Decoder> load_hf_model(const std::string& dir) {
  auto model = std::make_unique<nn::Decoder>(load_hf_config(dir));
  load_hf_weights(*model, dir);
  return model;
}

}  // namespace titan::models
