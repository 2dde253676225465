// Bad Hugging Face folders give one-line errors naming the file, the field or key, and the fix.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ops/op_harness.h"
#include "titan/checkpoint/json_file.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/models/decoder/hf_config.h"
#include "titan/models/decoder/peft.h"
#include "titan/models/decoder/weights.h"
#include "titan/models/qwen3/specs.h"

namespace titan::qwen3 {

using namespace titan::models;  // the shared decoder machinery the Qwen3 family is built on
namespace {

namespace fs = std::filesystem;

// A scratch copy of a fixture folder that a test may edit.
class ScratchModel {
 public:
  explicit ScratchModel(const std::string& name) {
    dir_ = fs::temp_directory_path() / ("titan_hf_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const fs::path src = testing::source_path("tests/fixtures/hf/untied_gqa2");
    fs::copy_file(src / "config.json", dir_ / "config.json");
    fs::copy_file(src / "model.safetensors", dir_ / "model.safetensors");
  }
  ~ScratchModel() { fs::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }

  void edit_config(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = ckpt::read_json_file((dir_ / "config.json").string());
    edit(j);
    std::ofstream(dir_ / "config.json") << j.dump(2);
  }
  // Rewrites model.safetensors after `edit` changes the name -> tensor list.
  void edit_weights(const std::function<void(std::vector<std::pair<std::string, Tensor>>&)>& edit) {
    const auto file = ckpt::SafetensorsFile::open((dir_ / "model.safetensors").string());
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const ckpt::TensorInfo& info : file.tensors()) tensors.emplace_back(info.name, file.get(info.name).clone());
    edit(tensors);
    ckpt::write_safetensors((dir_ / "model.safetensors").string(), tensors);
  }

 private:
  fs::path dir_;
};

using testing::error_of;

#define EXPECT_ERROR_CONTAINS(stmt, text) \
  EXPECT_NE(error_of([&] { stmt; }).find(text), std::string::npos) << error_of([&] { stmt; })

TEST(HfErrors, UnsupportedConfigFieldsAreNamed) {
  ScratchModel m("config");
  m.edit_config([](auto& j) { j["rope_scaling"] = {{"rope_type", "proportional"}, {"factor", 4.0}}; });
  EXPECT_ERROR_CONTAINS(load_hf_config(m.dir()), "field 'rope_scaling': rope_type 'proportional' is not supported. "
                        "HINT: supported: default, linear, dynamic, yarn, llama3, longrope");
  m.edit_config([](auto& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"low_freq_factor", 1.0}}; });
  EXPECT_ERROR_CONTAINS(load_hf_config(m.dir()), "field 'rope_scaling': key 'low_freq_factor' = 1.0 is not read by "
                        "rope_type 'yarn'");
  m.edit_config([](auto& j) { j["rope_scaling"] = {{"type", "linear"}}; });
  EXPECT_ERROR_CONTAINS(load_hf_config(m.dir()), "rope_type 'linear' needs a positive \"factor\"");
  m.edit_config([](auto& j) {
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"partial_rotary_factor", 0.5}};
  });
  EXPECT_ERROR_CONTAINS(load_hf_config(m.dir()), "key 'partial_rotary_factor' = 0.5 is not read by rope_type 'yarn' "
                        "(only full-width RoPE, 1.0, is supported)");
  m.edit_config([](auto& j) {
    j["rope_scaling"] = {{"rope_type", "longrope"}, {"long_factor", {1.0}}, {"short_factor", {1.0}}};
  });
  EXPECT_ERROR_CONTAINS(load_hf_config(m.dir()), "longrope: long_factor and short_factor must hold head_dim/2");
  m.edit_config([](auto& j) { j.erase("rope_scaling"); j["use_sliding_window"] = true; });
  EXPECT_ERROR_CONTAINS(load_hf_config(m.dir()), "field 'use_sliding_window'");
  m.edit_config([](auto& j) { j["use_sliding_window"] = false; j["architectures"] = {"GPTNeoXForCausalLM"}; });
  EXPECT_ERROR_CONTAINS(load_hf_config(m.dir()), "architecture 'GPTNeoXForCausalLM' is not supported");
  m.edit_config([](auto& j) { j["architectures"] = {"Qwen3ForCausalLM"}; j["hidden_size"] = "64"; });
  EXPECT_ERROR_CONTAINS(load_hf_config(m.dir()), "field 'hidden_size' must be an integer");
  m.edit_config([](auto& j) { j["hidden_size"] = 64; j["num_key_value_heads"] = 3; });
  EXPECT_ERROR_CONTAINS(load_hf_config(m.dir()), "must be a multiple of num_kv_heads");
}

// RoPE blocks Transformers cannot run (issue 49's sweep, item 15): yarn divides by log(rope_theta)
// (ZeroDivisionError at 1) and takes each beta's log (NaN logits below 0); refused here, named.
// Qwen3.5's mrope fields are checked for their type, and a huge original context is named as given.
TEST(HfErrors, RopeBlocksTransformersCannotRunAreNamed) {
  ScratchModel m("rope");
  m.edit_config([](auto& j) { j["rope_theta"] = 1.0; j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; });
  EXPECT_ERROR_CONTAINS(load_hf_config(m.dir()), "rope_type 'yarn' needs rope_theta > 1");
  m.edit_config([](auto& j) {
    j["rope_theta"] = 10000.0;
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", -3}};
  });
  EXPECT_ERROR_CONTAINS(load_hf_config(m.dir()), "yarn's beta_fast and beta_slow must be > 0, got -3 and 1");
  m.edit_config([](auto& j) {
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 1e30}};
  });
  EXPECT_EQ(load_hf_config(m.dir()).rope_scaling.original_max_position_embeddings, 1e30);  // not -2^63
  const auto qwen3_5 = [](const nlohmann::json& rope) {
    return nlohmann::json{{"architectures", nlohmann::json::array({"Qwen3_5ForCausalLM"})}, {"num_hidden_layers", 4},
                          {"rope_parameters", rope}};
  };
  EXPECT_ERROR_CONTAINS(config_from_hf(qwen3_5({{"rope_type", "default"}, {"rope_theta", 1e6}, {"mrope_section", "x"}}),
                                       "c.json"),
                        "c.json: field 'rope_parameters'.mrope_section must be a list of section sizes");
  nlohmann::json conv = qwen3_5({{"rope_type", "default"}, {"rope_theta", 1e6}});
  conv["linear_conv_kernel_dim"] = 1000000000000;
  EXPECT_ERROR_CONTAINS(config_from_hf(conv, "c.json"),
                        "c.json: field 'linear_conv_kernel_dim' is 1000000000000; it must be in [1, ");
}

// Qwen3MoeForCausalLM config.json fields that the model cannot take: one line naming the field.
TEST(HfErrors, MixtureOfExpertsConfigFields) {
  const auto moe = [](const std::string& key, const nlohmann::json& v) {
    nlohmann::json j = {{"architectures", nlohmann::json::array({"Qwen3MoeForCausalLM"})},
                        {"num_hidden_layers", 2}, {"num_experts", 8}, {"num_experts_per_tok", 2}};
    j[key] = v;
    return j;
  };
  EXPECT_ERROR_CONTAINS(config_from_hf(moe("num_experts", 0), "c.json"),
                        "c.json: field 'num_experts' must be > 0 for Qwen3MoeForCausalLM");
  EXPECT_ERROR_CONTAINS(config_from_hf(moe("num_experts_per_tok", 9), "c.json"), "num_experts_per_tok (top_k) = 9");
  EXPECT_ERROR_CONTAINS(config_from_hf(moe("mlp_only_layers", 1), "c.json"), "field 'mlp_only_layers' must be a list");
  EXPECT_ERROR_CONTAINS(config_from_hf(moe("mlp_only_layers", {0, 5}), "c.json"), "mlp_only_layers names layer 5");
  EXPECT_ERROR_CONTAINS(config_from_hf(moe("moe_intermediate_size", 0), "c.json"), "moe_hidden_dim");
  EXPECT_ERROR_CONTAINS(config_from_hf(moe("decoder_sparse_step", 3), "c.json"), "no layer is sparse");
  const nn::DecoderConfig c = config_from_hf(moe("num_local_experts", 8), "c.json");  // both spellings
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_FALSE(c.norm_topk_prob);  // Qwen3MoeConfig's default
  EXPECT_EQ(c.load_balance, nn::LoadBalance::none);  // output_router_logits defaults to false
}

// Found with tests/fuzz/hf_config_fuzz: a float field beyond float32's range (1e39) silently
// became inf, and a negative rms_norm_eps or a non-positive max_position_embeddings was accepted.
TEST(HfErrors, FloatFieldsMustFitFloat32AndContextMustBePositive) {
  const auto with = [](const std::string& key, const nlohmann::json& v) {
    nlohmann::json j = {{"architectures", nlohmann::json::array({"Qwen3ForCausalLM"})}};
    j[key] = v;
    return j;
  };
  EXPECT_ERROR_CONTAINS(config_from_hf(with("rope_theta", 1e39), "c.json"),
                        "c.json: field 'rope_theta' must be positive and fit a float32");
  EXPECT_ERROR_CONTAINS(config_from_hf(with("rope_parameters", {{"rope_theta", 1e39}}), "c.json"),
                        "field 'rope_theta' must be positive and fit a float32");
  EXPECT_ERROR_CONTAINS(config_from_hf(with("rms_norm_eps", 1e39), "c.json"),
                        "field 'rms_norm_eps' must be non-negative and fit a float32");
  EXPECT_ERROR_CONTAINS(config_from_hf(with("rms_norm_eps", -1e-6), "c.json"), "field 'rms_norm_eps' must be non-negative");
  EXPECT_ERROR_CONTAINS(config_from_hf(with("max_position_embeddings", 0), "c.json"),
                        "field 'max_position_embeddings' must be > 0, got 0");
  // 2^63 is one past int64's range: named as given, not wrapped to -2^63.
  EXPECT_ERROR_CONTAINS(config_from_hf(with("vocab_size", nlohmann::json::parse("9223372036854775808")), "c.json"),
                        "field 'vocab_size' is 9223372036854775808, out of range (at most 9223372036854775807)");
  EXPECT_EQ(config_from_hf(with("rms_norm_eps", 0.0), "c.json").norm_eps, 0.f);
  EXPECT_EQ(config_from_hf(with("rope_theta", 1e6), "c.json").rope_theta, 1e6f);
}

TEST(HfErrors, MissingUnexpectedAndMisshapenWeightsAreListed) {
  ScratchModel m("weights");
  m.edit_weights([](auto& t) {
    std::erase_if(t, [](auto& kv) { return kv.first == "model.norm.weight"; });
  });
  EXPECT_ERROR_CONTAINS(load_hf_model(m.dir()), "missing weights for this model's config: model.norm.weight");
  m.edit_weights([](auto& t) {
    t.emplace_back("model.norm.weight", Tensor::zeros({64}));
    t.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", Tensor::zeros({8}));
  });
  EXPECT_ERROR_CONTAINS(load_hf_model(m.dir()), "unexpected weights not in this model's config: model.layers.0.self_attn.rotary_emb.inv_freq");
  m.edit_weights([](auto& t) {
    std::erase_if(t, [](auto& kv) { return kv.first.find("rotary_emb") != std::string::npos; });
    for (auto& [name, tensor] : t) {
      if (name == "model.norm.weight") tensor = Tensor::zeros({63});
    }
  });
  EXPECT_ERROR_CONTAINS(load_hf_model(m.dir()), "tensor 'model.norm.weight' has shape [63], the model expects [64]");
}

// A NaN or infinity in a checkpoint is named at load, not found at step 1.
TEST(HfErrors, NonFiniteWeightsAreNamed) {
  ScratchModel m("nonfinite");
  m.edit_weights([](auto& t) {
    for (auto& [name, tensor] : t) {
      if (name == "model.layers.1.mlp.up_proj.weight") tensor.template data<float>()[5] = std::nanf("");
    }
  });
  EXPECT_ERROR_CONTAINS(load_hf_model(m.dir()), "tensor 'model.layers.1.mlp.up_proj.weight' holds nan at flat index 5");
  m.edit_weights([](auto& t) {
    for (auto& [name, tensor] : t) {
      if (name == "model.layers.1.mlp.up_proj.weight") tensor.template data<float>()[5] = 0.5f;
      if (name == "model.norm.weight") tensor = tensor.to(DType::bf16);
      if (name == "model.norm.weight") tensor.template data<uint16_t>()[3] = 0xff80;  // -inf
    }
  });
  EXPECT_ERROR_CONTAINS(load_hf_model(m.dir()), "tensor 'model.norm.weight' holds -inf at flat index 3");
}

TEST(HfErrors, Bf16WeightsLoadConverted) {
  ScratchModel m("bf16");
  m.edit_weights([](auto& t) {
    for (auto& kv : t) kv.second = kv.second.to(DType::bf16);
  });
  std::unique_ptr<nn::Decoder> model = load_hf_model(m.dir());
  // Each value is the bf16 rounding of the fixture's f32 value.
  const auto original = ckpt::SafetensorsFile::open(testing::source_path("tests/fixtures/hf/untied_gqa2/model.safetensors"));
  const Tensor want = original.get("model.embed_tokens.weight");
  const Tensor& got = model->tok_embeddings->table().value;
  for (int64_t i = 0; i < got.numel(); i += 97) {
    EXPECT_EQ(got.data<float>()[i], bf16_to_f32(f32_to_bf16(want.data<float>()[i])));
  }
}

TEST(Specs, PublishedSizesAndUnknownName) {
  // Parameter counts of the published models (tied counted once): 0.6B has 596M, 8B 8.19B.
  EXPECT_NEAR(find_spec("0.6B").config.num_params() / 1e6, 596.0, 1.0);
  EXPECT_NEAR(find_spec("8B").config.num_params() / 1e9, 8.19, 0.01);
  EXPECT_ERROR_CONTAINS(find_spec("7B"), "unknown Qwen3 spec '7B'. HINT: use one of debug, 0.6B");
}

// adapter_config.json's target_modules is a list of module names or one string (a regex or
// "all-linear") in PEFT; anything else means the file is not PEFT's, and is refused naming it.
TEST(HfErrors, AdapterTargetModulesMustBeStrings) {
  const fs::path dir = fs::temp_directory_path() / ("titan_hf_adapter_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(testing::source_path("tests/fixtures/lora/dense_all_linear/adapter"), dir);
  nlohmann::json config = ckpt::read_json_file((dir / "adapter_config.json").string());
  using nlohmann::json;
  for (const json& bad : {json(5), json::array({"q_proj", 7}), json::object()}) {
    config["target_modules"] = bad;
    std::ofstream(dir / "adapter_config.json") << config.dump(2);
    EXPECT_ERROR_CONTAINS(read_peft_adapter(dir.string()),
                          "adapter_config.json: target_modules is " + bad.dump() +
                              "; it must be a list of strings or a string");
  }
  for (const nlohmann::json& good : {nlohmann::json("all-linear"), nlohmann::json::array({"q_proj", "v_proj"})}) {
    config["target_modules"] = good;
    std::ofstream(dir / "adapter_config.json") << config.dump(2);
    EXPECT_EQ(error_of([&] { read_peft_adapter(dir.string()); }), "(no error)") << good.dump();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace titan::qwen3
