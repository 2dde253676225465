// The model-family seam (models/model_spec.h, models/builtin.cpp): every family is complete, the
// lookups find the family that owns a size or an HF architecture, and they fail in one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "ops/op_harness.h"
#include "titan/config/registry.h"
#include "titan/models/builtin.h"

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
    EXPECT_TRUE(f->build && f->init_weights && f->flops_per_token) << f->name;
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
  EXPECT_ERROR_CONTAINS(find_family("gpt2"), "unknown model family 'gpt2'. HINT: use one of qwen3, llama");
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

}  // namespace
}  // namespace titan::models
