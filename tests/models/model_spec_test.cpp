// The model-family seam (models/model_spec.h, models/builtin.cpp): every family is complete, the
// lookups find the family that owns a size or an HF architecture, and they fail in one line; a
// family builds its own structure, module types of its own included.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "ops/op_harness.h"
#include "titan/config/registry.h"
#include "titan/core/rng.h"
#include "titan/models/builtin.h"
#include "titan/nn/feed_forward.h"
#include "titan/ops/elementwise/elementwise.h"

namespace titan::models {
namespace {

using testing::error_of;
using testing::source_path;

#define EXPECT_ERROR_CONTAINS(stmt, text) \
  EXPECT_NE(error_of([&] { stmt; }).find(text), std::string::npos) << error_of([&] { stmt; })

TEST(ModelSpec, EveryFamilyFillsEveryField) {
  ASSERT_FALSE(model_families().empty());
  std::set<std::string> names, sizes, architectures;
  for (const ModelSpec* f : model_families()) {
    EXPECT_TRUE(names.insert(f->name).second) << "family named twice: " << f->name;
    EXPECT_FALSE(f->hf.architectures.empty()) << f->name;
    for (const std::string& a : f->hf.architectures) EXPECT_TRUE(architectures.insert(a).second) << a;
    for (const NamedSize& s : f->sizes) {
      EXPECT_TRUE(sizes.insert(s.name).second) << "size in two families: " << s.name;
      EXPECT_NO_THROW(s.config.validate()) << s.name;
    }
    EXPECT_TRUE(f->hf.read_config && f->hf.load_weights && f->hf.save_folder && f->hf.architecture_of &&
                f->hf.to_hf_tensors) << f->name;
    EXPECT_TRUE(f->parallel_plan.tp_split_dim && f->parallel_plan.tp_grad_is_partial &&
                f->parallel_plan.tp_local_config) << f->name;
    EXPECT_TRUE(f->config_tree && f->build && f->init_weights && f->flops_per_token) << f->name;
  }
}

TEST(ModelSpec, LookupsFindTheOwningFamily) {
  EXPECT_EQ(family_of_size("debug").name, "qwen3");
  EXPECT_EQ(family_of_size("235B-A22B").name, "qwen3");
  EXPECT_EQ(find_size("0.6B").config.num_layers, 28);
  EXPECT_EQ(&find_family("qwen3"), &family_of_architecture("Qwen3MoeForCausalLM"));
  EXPECT_EQ(family_of_architecture("MistralForCausalLM").name, "llama");
  EXPECT_EQ(family_of_architecture("Qwen2ForCausalLM").name, "llama");
  // Every fixture folder is claimed by the family that reads its architecture.
  for (const auto& [folder, family] : std::vector<std::pair<std::string, std::string>>{
           {"hf/tied_mha", "qwen3"}, {"hf/llama_bias", "llama"}, {"hf/mistral_headdim", "llama"},
           {"hf/qwen2_bias", "llama"}, {"hf_moe/e8_top2_norm", "qwen3"}}) {
    EXPECT_EQ(family_of_hf_folder(source_path("tests/fixtures/" + folder)).name, family) << folder;
  }
}

TEST(ModelSpec, UnknownNamesAreOneLineErrors) {
  EXPECT_ERROR_CONTAINS(find_family("gpt2"), "unknown model family 'gpt2'. HINT: use one of qwen3, qwen3_5, llama");
  EXPECT_ERROR_CONTAINS(family_of_size("70B"), "unknown model.name '70B'");
  EXPECT_ERROR_CONTAINS(family_of_architecture("GPT2LMHeadModel"), "no model family reads architecture");
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "titan_model_spec_gpt2";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["GPT2LMHeadModel"]})";
  EXPECT_ERROR_CONTAINS(family_of_hf_folder(dir.string()), "GPT2LMHeadModel");
  std::filesystem::remove_all(dir);
  EXPECT_ERROR_CONTAINS(family_of_hf_folder("/nonexistent/titan"), "config.json");
}

TEST(ModelSpec, ConfigFunctionsRegisterOnce) {
  register_config_functions();
  const size_t n = config::config_registry().size();
  register_config_functions();  // a second call adds nothing (no duplicate-name error either)
  EXPECT_EQ(config::config_registry().size(), n);
  EXPECT_EQ(config::find_config("qwen3_debug").fn().model.name, "debug");
  EXPECT_EQ(config::find_config("qwen3_30b_a3b_reduced").fn().model.name, "30B-A3B");
}


// A family's own module type: a feed-forward whose output is halved, registered as a plugin
// registers one and put at every feed_forward node by the family's config_tree. Halving is exact,
// so the family's model is, to the bit, the generic decoder with every w2 halved: the same loss
// and the same embedding gradient. build_model builds the family's structure, not the generic one.
class HalfFeedForwardConfig : public nn::FeedForwardConfig {
 public:
  using nn::FeedForwardConfig::FeedForwardConfig;
  std::vector<std::string> type_chain() const override { return {"HalfFeedForward", kType}; }
};

class HalfFeedForward : public nn::FeedForward {
 public:
  using nn::FeedForward::FeedForward;
  Tensor forward(const Tensor& x_ND, std::any& saved) const override {
    Tensor y_ND = nn::FeedForward::forward(x_ND, saved);
    ops::scale(y_ND, 0.5f);
    return y_ND;
  }
  Tensor backward(const Tensor& dy_ND, std::any& saved) override {
    Tensor half_ND = dy_ND.clone();
    ops::scale(half_ND, 0.5f);
    return nn::FeedForward::backward(half_ND, saved);
  }
  std::string describe() const override { return "half_feed_forward (test family)"; }
};

nn::ConfigTree half_feed_forward_tree(const nn::DecoderConfig& config) {
  nn::ConfigTree tree = nn::decoder_config_tree(config);
  for (auto& [path, node] : tree) {
    if (node->type_name() != nn::FeedForwardConfig::kType) continue;
    const auto& f = dynamic_cast<const nn::FeedForwardConfig&>(*node);
    node = std::make_shared<HalfFeedForwardConfig>(f.dim, f.hidden_dim, f.bias);
  }
  return tree;
}

TEST(ModelSpec, AFamilyBuildsItsOwnModuleTypes) {
  nn::module_registry().add(
      "HalfFeedForward",
      [](const nn::NodeConfig& n, const nn::ModuleBuild& b) -> std::unique_ptr<nn::Module> {
        return std::make_unique<HalfFeedForward>(nn::node_as<HalfFeedForwardConfig>(n, b.path()), b);
      },
      "test family");
  const ModelSpec& generic = find_family("qwen3");
  ModelSpec family = generic;  // its HF adapter, plan and init; its own structure
  family.name = "half_ffn";
  family.config_tree = &half_feed_forward_tree;
  nn::DecoderConfig c = find_size("debug").config;
  c.num_layers = 2;
  const std::unique_ptr<nn::Decoder> own = build_model(family, c), plain = build_model(generic, c);
  for (const auto& layer : own->layers) EXPECT_EQ(layer->feed_forward->describe(), "half_feed_forward (test family)");
  EXPECT_EQ(plain->layers[0]->feed_forward->describe(), "feed_forward (built-in)");
  family.init_weights(*own, 5);
  generic.init_weights(*plain, 5);
  Tensor ids = Tensor::empty({2, 16}, DType::i64);
  Rng(9).fill_int(ids.data<int64_t>(), ids.numel(), c.vocab_size);
  const double unhalved = plain->forward_loss(ids, ids).loss;
  for (nn::Parameter* p : plain->parameters()) {
    if (p->fqn.ends_with(".w2.weight")) ops::scale(p->value, 0.5f);
  }
  const nn::LossResult a = own->forward_backward(ids, ids), b = plain->forward_backward(ids, ids);
  EXPECT_NE(a.loss, unhalved);  // the family's module is in the computation
  EXPECT_EQ(a.loss, b.loss);
  const Tensor& ga = own->parameters().front()->grad;
  const Tensor& gb = plain->parameters().front()->grad;
  ASSERT_EQ(own->parameters().front()->fqn, "tok_embeddings.weight");
  ASSERT_EQ(ga.numel(), gb.numel());
  int64_t differ = 0;
  for (int64_t i = 0; i < ga.numel(); ++i) differ += ga.data<float>()[i] != gb.data<float>()[i];
  EXPECT_EQ(differ, 0);
}

}  // namespace
}  // namespace titan::models
