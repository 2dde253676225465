// HF interop for training: the model a run builds (spec or config.json), loading an HF folder
// into it, and save_hf_folder's export (round trip, shards + index, bf16 rounding, tying,
// tokenizer files, atomic replacement). Parity of the loaded numbers with Transformers is
// qwen3_hf_parity_test's job; tools/check_hf_roundtrip.py checks exports against Transformers.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "ops/op_harness.h"
#include "titan/checkpoint/hf_folder.h"
#include "titan/checkpoint/json_file.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/hf_checkpoint.h"
#include "titan/models/decoder/hf_config.h"
#include "titan/models/decoder/hf_names.h"
#include "titan/models/decoder/weights.h"

namespace titan::qwen3 {

using namespace titan::models;  // the shared decoder machinery the Qwen3 family is built on
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::source_path;

#define EXPECT_ERROR_CONTAINS(stmt, text) \
  EXPECT_NE(error_of([&] { stmt; }).find(text), std::string::npos) << error_of([&] { stmt; })

class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : dir_(fs::temp_directory_path() / ("titan_hfx_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~TempDir() { fs::remove_all(dir_); }
  std::string operator/(const std::string& sub) const { return (dir_ / sub).string(); }
  std::string str() const { return dir_.string(); }

 private:
  fs::path dir_;
};

std::string fixture(const std::string& name) { return source_path("tests/fixtures/hf/" + name); }

void expect_same_weights(nn::Decoder& a, nn::Decoder& b) {
  const nn::ParameterList pa = a.parameters(), pb = b.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i]->fqn, pb[i]->fqn);
    ASSERT_EQ(pa[i]->value.shape(), pb[i]->value.shape()) << pa[i]->fqn;
    EXPECT_EQ(std::memcmp(pa[i]->value.raw_data(), pb[i]->value.raw_data(), pa[i]->value.nbytes()), 0)
        << pa[i]->fqn;
  }
}

void expect_same_config(const nn::DecoderConfig& a, const nn::DecoderConfig& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.hidden_dim, b.hidden_dim);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.tie_embeddings, b.tie_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.mlp_bias, b.mlp_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.max_seq_len, b.max_seq_len);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok);
  EXPECT_EQ(a.moe_hidden_dim, b.moe_hidden_dim);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.decoder_sparse_step, b.decoder_sparse_step);
  EXPECT_EQ(a.mlp_only_layers, b.mlp_only_layers);
  EXPECT_EQ(a.load_balance, b.load_balance);
  EXPECT_EQ(a.router_aux_loss_coef, b.router_aux_loss_coef);
}

class ExportRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(ExportRoundTrip, ExportThenLoadGivesIdenticalWeightsAndConfig) {
  TempDir tmp(std::string("rt_") + GetParam());
  std::unique_ptr<nn::Decoder> model = load_hf_model(fixture(GetParam()));
  HfExportOptions options;
  options.architecture = hf_architecture(fixture(GetParam()));  // Mistral would default to Llama
  save_hf_folder(*model, tmp / "out", options);
  EXPECT_TRUE(fs::exists(tmp / "out/model.safetensors"));
  EXPECT_FALSE(fs::exists(tmp / "out/model.safetensors.index.json"));
  std::unique_ptr<nn::Decoder> back = load_hf_model(tmp / "out");
  expect_same_config(model->config(), back->config());
  expect_same_weights(*model, *back);

  // Same architecture as the source; a tied model stores no lm_head.weight; HF metadata present.
  const auto written = ckpt::read_json_file(tmp / "out/config.json");
  const auto source = ckpt::read_json_file(fixture(GetParam()) + "/config.json");
  EXPECT_EQ(written["architectures"], source["architectures"]);
  EXPECT_EQ(written["model_type"], source["model_type"]);
  const auto file = ckpt::SafetensorsFile::open(tmp / "out/model.safetensors");
  EXPECT_EQ(file.find("lm_head.weight") != nullptr, !model->config().tie_embeddings);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  for (const ckpt::TensorInfo& info : file.tensors()) EXPECT_EQ(info.dtype, DType::f32) << info.name;
  EXPECT_FALSE(fs::exists(tmp / ("out.tmp." + std::to_string(::getpid()))));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ExportRoundTrip,
                         ::testing::Values("tied_mha", "untied_gqa2", "attn_bias", "qwen2_bias", "llama_bias",
                                           "mistral_headdim", "../hf_moe/mlp_only_aux", "../hf_moe/sparse_step2_tied"));

TEST(HfExport, SmallShardLimitWritesShardsAndAnIndexThatLoadBack) {
  TempDir tmp("shards");
  std::unique_ptr<nn::Decoder> model = load_hf_model(fixture("untied_gqa2"));
  HfExportOptions options;
  options.max_shard_bytes = 100'000;  // the embedding (77 KB) and head fit alone; layers split
  save_hf_folder(*model, tmp / "out", options);
  EXPECT_FALSE(fs::exists(tmp / "out/model.safetensors"));
  const auto index = ckpt::read_json_file(tmp / "out/model.safetensors.index.json");
  std::set<std::string> shard_files;
  for (const auto& [name, file] : index["weight_map"].items()) shard_files.insert(file.get<std::string>());
  ASSERT_GE(shard_files.size(), 3u);
  const size_t n = shard_files.size();
  int64_t total = 0;
  size_t i = 0;
  for (const std::string& name : shard_files) {
    char want[64];
    std::snprintf(want, sizeof(want), "model-%05zu-of-%05zu.safetensors", ++i, n);
    EXPECT_EQ(name, want);
    const auto shard = ckpt::SafetensorsFile::open(tmp / ("out/" + name));
    int64_t bytes = 0;
    for (const ckpt::TensorInfo& info : shard.tensors()) bytes += static_cast<int64_t>(info.end - info.begin);
    EXPECT_TRUE(bytes <= options.max_shard_bytes || shard.tensors().size() == 1) << name << ": " << bytes;
    total += bytes;
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), total);
  EXPECT_EQ(index["weight_map"].size(), model->parameters().size());
  std::unique_ptr<nn::Decoder> back = load_hf_model(tmp / "out");
  expect_same_weights(*model, *back);
}

TEST(HfExport, Bf16IsRoundToNearestEvenOfF32) {
  TempDir tmp("bf16");
  std::unique_ptr<nn::Decoder> model = load_hf_model(fixture("attn_bias"));
  // Values exactly between two bf16 neighbours must go to the even one.
  float* emb = model->tok_embeddings->table().value.data<float>();
  const uint32_t ties[] = {0x3f808000u /* -> 0x3f80 */, 0x3f818000u /* -> 0x3f82 */, 0xbf80c001u};
  for (int i = 0; i < 3; ++i) std::memcpy(&emb[i], &ties[i], 4);
  HfExportOptions options;
  options.dtype = "bfloat16";
  save_hf_folder(*model, tmp / "out", options);
  EXPECT_EQ(ckpt::read_json_file(tmp / "out/config.json")["torch_dtype"], "bfloat16");
  const auto file = ckpt::SafetensorsFile::open(tmp / "out/model.safetensors");
  for (nn::Parameter* p : model->parameters()) {
    const Tensor t = file.get(to_hf_name(p->fqn));
    ASSERT_EQ(t.dtype(), DType::bf16) << p->fqn;
    const float* src = p->value.data<float>();
    const auto* got = static_cast<const uint16_t*>(t.raw_data());
    for (int64_t k = 0; k < t.numel(); ++k) {
      uint32_t bits;
      std::memcpy(&bits, &src[k], 4);
      const uint32_t rne = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;  // finite values only
      ASSERT_EQ(got[k], rne) << p->fqn << "[" << k << "]";
    }
  }
  const auto* e = static_cast<const uint16_t*>(file.get("model.embed_tokens.weight").raw_data());
  EXPECT_EQ(e[0], 0x3f80);
  EXPECT_EQ(e[1], 0x3f82);
  EXPECT_EQ(e[2], 0xbf81);
  // And it loads back (converted to f32) as those values.
  std::unique_ptr<nn::Decoder> back = load_hf_model(tmp / "out");
  EXPECT_EQ(back->tok_embeddings->table().value.data<float>()[1], bf16_to_f32(0x3f82));
}

TEST(HfExport, TokenizerFilesAndTokenIdsAreCarried) {
  TempDir tmp("tok");
  fs::create_directories(tmp / "assets");
  std::ofstream(tmp / "assets/tokenizer.json") << "{\"model\": {}}";
  std::ofstream(tmp / "assets/generation_config.json") << "{\"eos_token_id\": 7}";
  std::ofstream(tmp / "assets/config.json") << "{\"bos_token_id\": 5, \"eos_token_id\": [6, 7]}";
  std::ofstream(tmp / "assets/unrelated.txt") << "x";
  std::unique_ptr<nn::Decoder> model = load_hf_model(fixture("tied_mha"));
  HfExportOptions options;
  options.tokenizer_dir = tmp / "assets";
  save_hf_folder(*model, tmp / "out", options);
  EXPECT_EQ(ckpt::read_file_bytes(tmp / "out/tokenizer.json"), "{\"model\": {}}");
  EXPECT_TRUE(fs::exists(tmp / "out/generation_config.json"));
  EXPECT_FALSE(fs::exists(tmp / "out/unrelated.txt"));
  EXPECT_FALSE(fs::exists(tmp / "out/vocab.json"));
  const auto config = ckpt::read_json_file(tmp / "out/config.json");
  EXPECT_EQ(config["bos_token_id"], 5);
  EXPECT_EQ(config["eos_token_id"], nlohmann::json({6, 7}));
}

// An earlier export is replaced whole, and only once the new one is complete; a folder of other
// files is refused (checkpoint/output_folder.h) unless options.overwrite.
TEST(HfExport, ReplacesAnExistingFolderOnlyWhenComplete) {
  TempDir tmp("atomic");
  std::unique_ptr<nn::Decoder> model = load_hf_model(fixture("qwen2_bias"));
  save_hf_folder(*model, tmp / "out");
  std::ofstream(tmp / "out/tokenizer_config.json") << "{\"marker\": \"previous export\"}";
  HfExportOptions bad;
  bad.architecture = "MistralForCausalLM";  // cannot express q/k/v biases: fails mid-export
  EXPECT_ERROR_CONTAINS(save_hf_folder(*model, tmp / "out", bad),
                        "MistralForCausalLM cannot express this model");
  EXPECT_TRUE(fs::exists(tmp / "out/tokenizer_config.json"));
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.str()), fs::directory_iterator()), 1) << "no tmp folder left";

  save_hf_folder(*model, tmp / "out/");  // a trailing slash names the same folder
  EXPECT_FALSE(fs::exists(tmp / "out/tokenizer_config.json"));
  EXPECT_TRUE(fs::exists(tmp / "out/config.json"));
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.str()), fs::directory_iterator()), 1);

  fs::create_directories(tmp / "mine");
  std::ofstream(tmp / "mine/notes.txt") << "my notes";
  EXPECT_ERROR_CONTAINS(save_hf_folder(*model, tmp / "mine"),
                        "is not empty and is not a Hugging Face model folder; writing it would delete what is there");
  EXPECT_TRUE(fs::exists(tmp / "mine/notes.txt"));
  HfExportOptions overwrite;
  overwrite.overwrite = true;
  save_hf_folder(*model, tmp / "mine", overwrite);
  EXPECT_FALSE(fs::exists(tmp / "mine/notes.txt"));
  EXPECT_TRUE(fs::exists(tmp / "mine/config.json"));
  EXPECT_ERROR_CONTAINS(save_hf_folder(*model, tmp / "x", HfExportOptions{"float16", 1, "", ""}),
                        "dtype 'float16' is not float32 or bfloat16");
}

TEST(HfImport, ArchitectureOfAFolder) {
  EXPECT_EQ(hf_architecture(fixture("mistral_headdim")), "MistralForCausalLM");
  EXPECT_EQ(hf_architecture("/nonexistent"), "");
  // Without one, the export picks the architecture that builds the same math.
  EXPECT_EQ(default_hf_architecture(load_hf_config(fixture("mistral_headdim"))), "LlamaForCausalLM");
  EXPECT_EQ(default_hf_architecture(load_hf_config(fixture("qwen2_bias"))), "Qwen2ForCausalLM");
  EXPECT_EQ(default_hf_architecture(load_hf_config(fixture("tied_mha"))), "Qwen3ForCausalLM");
}

TEST(HfImport, ModelConfigFromSpecOrFolder) {
  const ResolvedModel spec = resolve_model("debug", "", 0);
  EXPECT_EQ(spec.config.dim, 256);
  EXPECT_EQ(spec.spec->name, "qwen3");  // the family that has the named size
  EXPECT_EQ(resolve_model("debug", "", 2).config.num_layers, 2);
  const ResolvedModel folder = resolve_model("", fixture("llama_bias"), 0);
  expect_same_config(folder.config, load_hf_config(fixture("llama_bias")));
  EXPECT_EQ(folder.spec->name, "llama");  // LlamaForCausalLM: the family that reads it
  EXPECT_EQ(resolve_model("", fixture("llama_bias"), 1).config.num_layers, 1);
  EXPECT_ERROR_CONTAINS(resolve_model("", "", 0), "model.name is empty and model.hf_assets_path is not set");
  EXPECT_ERROR_CONTAINS(resolve_model("no_such_size", "", 0), "unknown model.name 'no_such_size'");
}

TEST(HfImport, LoadInitialChecksTheFolderAgainstTheModel) {
  // Same config: loads; the tied fixture has no lm_head.weight, which is allowed.
  nn::Decoder model(load_hf_config(fixture("tied_mha")));
  load_initial_hf(model, fixture("tied_mha"));
  std::unique_ptr<nn::Decoder> want = load_hf_model(fixture("tied_mha"));
  expect_same_weights(model, *want);

  // Fields no shape shows are compared with the folder's config.json.
  nn::DecoderConfig other_theta = load_hf_config(fixture("tied_mha"));
  other_theta.rope_theta = 10000.0f;
  nn::Decoder wrong(other_theta);
  EXPECT_ERROR_CONTAINS(load_initial_hf(wrong, fixture("tied_mha")),
                        "config.json: field 'rope_theta' gives 1e+06 but the model being trained has 10000");
  // Untied model from a tied folder: lm_head.weight is missing and named.
  TempDir tmp("initial");
  nn::DecoderConfig untied = load_hf_config(fixture("tied_mha"));
  untied.tie_embeddings = false;
  nn::Decoder model2(untied);
  save_hf_folder(model2, tmp / "untied");
  fs::copy_file(fixture("tied_mha") + "/model.safetensors", tmp / "untied/model.safetensors",
                fs::copy_options::overwrite_existing);
  EXPECT_ERROR_CONTAINS(load_initial_hf(model2, tmp / "untied"), "missing weights for this model's config: lm_head.weight");
  // Fewer layers than the folder: the extra layers are unexpected keys.
  nn::DecoderConfig shallow = load_hf_config(fixture("tied_mha"));
  shallow.num_layers = 1;
  nn::Decoder model3(shallow);
  EXPECT_ERROR_CONTAINS(load_initial_hf(model3, fixture("tied_mha")), "unexpected weights not in this model's config: model.layers.1.");
}

nn::DecoderConfig from_json(const nlohmann::json& j) { return config_from_hf(j, "x/config.json"); }

TEST(HfConfig, ArchitectureDefaultsAndUnsupportedFields) {
  nlohmann::json base = {{"architectures", {"MistralForCausalLM"}}, {"hidden_size", 64}, {"num_attention_heads", 8},
                         {"num_hidden_layers", 1}, {"intermediate_size", 32}, {"vocab_size", 50}};
  // MistralConfig's default sliding_window (4096) is active.
  EXPECT_ERROR_CONTAINS(from_json(base), "x/config.json: field 'sliding_window' is 4096 (MistralConfig's default");
  base["sliding_window"] = nullptr;
  EXPECT_EQ(from_json(base).num_kv_heads, 8);  // MistralConfig's default
  base["num_attention_heads"] = 4;
  base["num_key_value_heads"] = nullptr;  // null: = num_attention_heads
  EXPECT_EQ(from_json(base).num_kv_heads, 4);
  EXPECT_EQ(from_json(base).head_dim, 16);  // hidden / heads
  EXPECT_EQ(from_json(base).rope_theta, 10000.0f);
  EXPECT_EQ(from_json(base).max_seq_len, 131072);

  nlohmann::json llama = base;
  llama["architectures"] = {"LlamaForCausalLM"};
  llama.erase("sliding_window");
  llama.erase("num_key_value_heads");
  EXPECT_EQ(from_json(llama).num_kv_heads, 4);
  EXPECT_EQ(from_json(llama).max_seq_len, 2048);
  llama["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(from_json(llama).rope_theta, 10000.0f);
  llama["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  EXPECT_ERROR_CONTAINS(from_json(llama), "x/config.json: field 'rope_scaling': rope_type 'llama3' needs "
                                          "low_freq_factor and high_freq_factor");
  llama["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}};
  EXPECT_EQ(from_json(llama).rope_scaling.type, ops::RopeType::llama3);
  EXPECT_EQ(from_json(llama).rope_scaling.original_max_position_embeddings, 2048);  // max_position_embeddings
  llama["original_max_position_embeddings"] = 1024;  // Phi3's top-level field wins, as in standardize_rope_params
  EXPECT_EQ(from_json(llama).rope_scaling.original_max_position_embeddings, 1024);
  llama.erase("original_max_position_embeddings");
  llama["rope_scaling"] = nullptr;
  llama["hidden_act"] = "gelu";
  EXPECT_ERROR_CONTAINS(from_json(llama), "field 'hidden_act' is \"gelu\"");
  llama["hidden_act"] = "silu";
  llama["partial_rotary_factor"] = 0.5;
  EXPECT_ERROR_CONTAINS(from_json(llama), "field 'partial_rotary_factor' is 0.5");
  llama.erase("partial_rotary_factor");
  llama["architectures"] = {"Qwen2ForCausalLM"};
  llama["use_sliding_window"] = true;
  EXPECT_ERROR_CONTAINS(from_json(llama), "field 'use_sliding_window' is true");
  llama["architectures"] = {"GemmaForCausalLM"};
  EXPECT_ERROR_CONTAINS(from_json(llama), "field 'architectures': architecture 'GemmaForCausalLM' is not supported. "
                                          "HINT: supported: Qwen3ForCausalLM, Qwen3MoeForCausalLM, Qwen2ForCausalLM, LlamaForCausalLM, "
                                          "MistralForCausalLM");
}

TEST(HfConfig, ExportedConfigReadsBackForEveryArchitecture) {
  for (const char* name : {"tied_mha", "attn_bias", "qwen2_bias", "llama_bias", "mistral_headdim"}) {
    const nn::DecoderConfig c = load_hf_config(fixture(name));
    const auto arch = ckpt::read_json_file(fixture(name) + "/config.json")["architectures"][0].get<std::string>();
    const nlohmann::json j = config_to_hf(c, arch, "float32");
    expect_same_config(from_json(j), c);
    EXPECT_EQ(j["rms_norm_eps"].get<double>(), 1e-6) << "shortest decimal, not 9.99999997e-07";
  }
}

}  // namespace
}  // namespace titan::qwen3
