// Override registry semantics on a real decoder config tree: globs (`*` across dots, character
// classes), exact vs derived type matching, order independence, conflicts on a node and on an
// ancestor (both names and the node in one line), no-match warnings, derive<> copying the shared
// fields, and the decoder refusing replacements it cannot build.
#include <gtest/gtest.h>

#include "ops/op_harness.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/weights.h"
#include "titan/nn/decoder.h"
#include "titan/plugins/override_registry.h"

namespace titan::plugins {
namespace {

using testing::error_of;

class RopeFast : public nn::RopeConfig {
 public:
  int64_t tile = 128;
  std::vector<std::string> type_chain() const override { return {"RopeFast", "Rope"}; }
};
class FlashAttentionConfig : public nn::AttentionConfig {
 public:
  std::vector<std::string> type_chain() const override { return {"FlashAttention", "Attention"}; }
};
class FlashBlockConfig : public nn::TransformerBlockConfig {
 public:
  std::vector<std::string> type_chain() const override { return {"FlashBlock", "TransformerBlock"}; }
};
class RopeFaster : public RopeFast {
 public:
  std::vector<std::string> type_chain() const override { return {"RopeFaster", "RopeFast", "Rope"}; }
};

nn::DecoderConfig twelve_layers() {
  nn::DecoderConfig c = models::find_size("debug").config;
  c.num_layers = 12;
  return c;
}

Override rope_override(const std::string& name, std::vector<std::string> patterns, bool exact = false) {
  Override o;
  o.name = name;
  o.target_type = "Rope";
  o.exact = exact;
  o.fqn_patterns = std::move(patterns);
  o.factory = [](const nn::NodeConfig& n) -> std::shared_ptr<const nn::NodeConfig> {
    return derive<RopeFast>(dynamic_cast<const nn::RopeConfig&>(n));
  };
  return o;
}

TEST(OverrideRegistry, GlobsCrossDotsAndTakeCharacterClasses) {
  EXPECT_TRUE(glob_match("model.layers.*.attention.rope", "model.layers.11.attention.rope"));
  EXPECT_TRUE(glob_match("*.rope", "model.layers.3.attention.rope"));  // * crosses dots
  EXPECT_TRUE(glob_match("model.layers.1[0-9].attention.rope", "model.layers.10.attention.rope"));
  EXPECT_FALSE(glob_match("model.layers.1[0-9].attention.rope", "model.layers.1.attention.rope"));
  EXPECT_FALSE(glob_match("model.layers.1[0-9].attention.rope", "model.layers.20.attention.rope"));
  EXPECT_TRUE(glob_match("model.layers.?.attention.rope", "model.layers.7.attention.rope"));
  EXPECT_FALSE(glob_match("model.layers.?.attention.rope", "model.layers.10.attention.rope"));

  const nn::ConfigTree tree = nn::decoder_config_tree(twelve_layers());
  const std::vector<std::string> hit = matching_nodes(rope_override("r", {"model.layers.1[0-9].attention.rope"}), tree);
  EXPECT_EQ(hit, (std::vector<std::string>{"model.layers.10.attention.rope", "model.layers.11.attention.rope"}));
  EXPECT_EQ(matching_nodes(rope_override("r", {}), tree).size(), 12u) << "no pattern: every node of the type";
}

TEST(OverrideRegistry, ReplacesLogsAndCopiesTheSharedFields) {
  nn::DecoderConfig c = twelve_layers();
  c.rope_theta = 5e5f;
  nn::ConfigTree tree = nn::decoder_config_tree(c);
  const std::vector<Replacement> done = apply_overrides(tree, {rope_override("fast", {"model.layers.[0-2].*"})});
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].path, "model.layers.0.attention.rope");
  EXPECT_EQ(done[0].old_type, "Rope");
  EXPECT_EQ(done[0].new_type, "RopeFast");
  const auto* fast = dynamic_cast<const RopeFast*>(tree.at("model.layers.2.attention.rope").get());
  ASSERT_NE(fast, nullptr);
  EXPECT_EQ(fast->theta, 5e5f) << "derive<> copies the fields RopeConfig declares";
  EXPECT_EQ(fast->head_dim, c.head_dim);
  EXPECT_EQ(fast->tile, 128);
  EXPECT_EQ(tree.at("model.layers.3.attention.rope")->type_name(), "Rope");
}

TEST(OverrideRegistry, ExactMatchesOnlyThatTypeDerivedMatchesSubtypes) {
  nn::ConfigTree tree = nn::decoder_config_tree(twelve_layers());
  tree["model.layers.0.attention.rope"] = std::make_shared<RopeFaster>();
  EXPECT_EQ(matching_nodes(rope_override("e", {}, true), tree).size(), 11u);
  EXPECT_EQ(matching_nodes(rope_override("d", {}, false), tree).size(), 12u);
  Override fast_only = rope_override("f", {});
  fast_only.target_type = "RopeFast";
  EXPECT_EQ(matching_nodes(fast_only, tree), (std::vector<std::string>{"model.layers.0.attention.rope"}));
}

TEST(OverrideRegistry, ConflictsNameBothOverridesAndTheNode) {
  nn::ConfigTree tree = nn::decoder_config_tree(twelve_layers());
  const nn::ConfigTree before = tree;
  std::string msg = error_of([&] {
    apply_overrides(tree, {rope_override("a", {"model.layers.1*"}), rope_override("b", {"model.layers.[0-1].*"})});
  });
  EXPECT_NE(msg.find("[Override] a and b both claim node model.layers.1.attention.rope"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  EXPECT_EQ(tree, before) << "nothing is replaced when the overrides conflict";
  // Order does not matter: the same conflict the other way round.
  msg = error_of([&] {
    apply_overrides(tree, {rope_override("b", {"model.layers.[0-1].*"}), rope_override("a", {"model.layers.1*"})});
  });
  EXPECT_NE(msg.find("both claim node model.layers.1.attention.rope"), std::string::npos) << msg;

  Override attention;
  attention.name = "whole_attention";
  attention.target_type = "Attention";
  attention.fqn_patterns = {"model.layers.4.attention"};
  attention.factory = [](const nn::NodeConfig& n) -> std::shared_ptr<const nn::NodeConfig> {
    return derive<FlashAttentionConfig>(dynamic_cast<const nn::AttentionConfig&>(n));
  };
  msg = error_of([&] { apply_overrides(tree, {rope_override("rope", {}), attention}); });
  EXPECT_NE(msg.find("both claim node model.layers.4.attention.rope (whole_attention claims its ancestor "
                     "model.layers.4.attention)"),
            std::string::npos)
      << msg;
}

TEST(OverrideRegistry, AnOverrideMatchingNothingIsOnlyAWarning) {
  nn::ConfigTree tree = nn::decoder_config_tree(twelve_layers());
  const std::vector<Replacement> done =
      apply_overrides(tree, {rope_override("none", {"model.layers.99.*"}), rope_override("one", {"*.0.*"})});
  EXPECT_EQ(done.size(), 1u);
}

TEST(OverrideRegistry, TheDecoderRefusesNodesItCannotBuild) {
  const nn::DecoderConfig c = twelve_layers();
  nn::ConfigTree tree = nn::decoder_config_tree(c);
  tree["model.layers.2.attention"] = derive<FlashAttentionConfig>(
      dynamic_cast<const nn::AttentionConfig&>(*tree.at("model.layers.2.attention")));
  std::string msg = error_of([&] { nn::Decoder model(c, tree); });
  EXPECT_NE(msg.find("model.layers.2.attention: no module is registered for node type FlashAttention"), std::string::npos)
      << msg;
  tree = nn::decoder_config_tree(c);
  tree["model.layers.2.attention.rope"] = std::make_shared<RopeFast>();
  msg = error_of([&] { nn::Decoder model(c, tree); });
  EXPECT_NE(msg.find("model.layers.2.attention.rope: no module is registered for node type RopeFast"), std::string::npos)
      << msg;
  // A node of another kind where a RoPE belongs: its module is not a RoPE.
  tree["model.layers.2.attention.rope"] = std::make_shared<nn::RmsNormConfig>(8, 1e-6f);
  msg = error_of([&] { nn::Decoder model(c, tree); });
  EXPECT_NE(msg.find("model.layers.2.attention.rope: the module built for node type RmsNorm is not a Rope module"),
            std::string::npos)
      << msg;
  // Containers are built from their children; nodes are replaced, never added.
  tree = nn::decoder_config_tree(c);
  tree["model.layers.2"] = std::make_shared<FlashBlockConfig>();
  msg = error_of([&] { nn::Decoder model(c, tree); });
  EXPECT_NE(msg.find("model.layers.2 is a FlashBlock node, but TransformerBlock nodes are containers"), std::string::npos)
      << msg;
  tree = nn::decoder_config_tree(c);
  tree["model.layers.2.attention.extra"] = std::make_shared<RopeFast>();
  msg = error_of([&] { nn::Decoder model(c, tree); });
  EXPECT_NE(msg.find("model.layers.2.attention.extra (RopeFast) that the model does not"), std::string::npos) << msg;
}

// Any node kind takes a registered module: every RmsNorm node (q/k norms, block norms, the final
// norm) replaced by a module that counts its calls and otherwise is the built-in one. Parameter
// names do not change, and the loss is the built-in model's.
class CountingNormConfig : public nn::RmsNormConfig {
 public:
  std::vector<std::string> type_chain() const override { return {"CountingNorm", "RmsNorm"}; }
};
int counting_norm_calls = 0;
class CountingNorm : public nn::RmsNorm {
 public:
  using nn::RmsNorm::RmsNorm;
  Tensor forward(const Tensor& x, std::any& saved) const override {
    ++counting_norm_calls;
    return nn::RmsNorm::forward(x, saved);
  }
  std::string describe() const override { return "counting_norm (test)"; }
};

TEST(OverrideRegistry, EveryNodeKindTakesARegisteredModule) {
  nn::DecoderConfig c = twelve_layers();
  c.num_layers = 2;
  nn::module_registry().add("CountingNorm", [](const nn::NodeConfig& n, const nn::ModuleBuild& b) -> std::unique_ptr<nn::Module> {
    return std::make_unique<CountingNorm>(nn::node_as<CountingNormConfig>(n, b.path()), b.fqn());
  }, "test");
  EXPECT_NE(error_of([] { nn::module_registry().add("CountingNorm", nullptr, "again"); }).find("already registered (by test)"),
            std::string::npos);
  Override o;
  o.name = "counting_norm";
  o.target_type = "RmsNorm";
  o.factory = [](const nn::NodeConfig& n) -> std::shared_ptr<const nn::NodeConfig> {
    return derive<CountingNormConfig>(dynamic_cast<const nn::RmsNormConfig&>(n));
  };
  nn::ConfigTree tree = nn::decoder_config_tree(c);
  EXPECT_EQ(apply_overrides(tree, {o}).size(), 2u * 4u + 1u);  // per layer: 2 block norms + q/k norms; the final norm
  nn::Decoder built_in(c), replaced(c, tree);
  models::init_weights(built_in, 3);
  models::init_weights(replaced, 3);
  const nn::ParameterList a = built_in.parameters(), b = replaced.parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]->fqn, b[i]->fqn);
  Tensor ids = Tensor::empty({1, 8}, DType::i64);
  for (int64_t t = 0; t < 8; ++t) ids.data<int64_t>()[t] = (t * 37) % c.vocab_size;
  const double want = built_in.forward_backward(ids, ids).loss;
  EXPECT_EQ(replaced.forward_backward(ids, ids).loss, want);
  EXPECT_EQ(counting_norm_calls, 9);
}

}  // namespace
}  // namespace titan::plugins
