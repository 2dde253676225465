// LoRA (nn/lora.h, plugins/lora.h, models/decoder/peft.h): the module's math against a float64
// evaluation of its formula, adapters made by Hugging Face PEFT (fixtures/lora, made by
// tools/make_lora_fixtures.py) against PEFT's own logits and merge_and_unload() weights, and the
// PEFT folder titan writes read back.
#include <gtest/gtest.h>

#include <any>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ops/op_harness.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/hf_checkpoint.h"
#include "titan/models/decoder/hf_names.h"
#include "titan/models/decoder/peft.h"
#include "titan/models/decoder/weights.h"
#include "titan/nn/generate.h"
#include "titan/nn/lora.h"
#include "titan/plugins/lora.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::source_path;

#define EXPECT_ERROR_CONTAINS(stmt, text) \
  EXPECT_NE(error_of([&] { stmt; }).find(text), std::string::npos) << error_of([&] { stmt; })

class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : dir_(fs::temp_directory_path() / ("titan_lora_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~TempDir() { fs::remove_all(dir_); }
  std::string operator/(const std::string& sub) const { return (dir_ / sub).string(); }

 private:
  fs::path dir_;
};

struct Case {
  std::string name, base;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {{"dense_all_linear", "tests/fixtures/hf/untied_gqa2"},
                                      {"dense_qv_bias", "tests/fixtures/hf/attn_bias"},
                                      {"moe_attention", "tests/fixtures/hf_moe/e8_top2_norm"},
                                      {"qwen3_5_all_linear", "tests/fixtures/hf_qwen3_5/text"},
                                      {"qwen3_5_moe_all_linear", "tests/fixtures/hf_qwen3_5/moe"},
                                      {"moe_experts", "tests/fixtures/hf_moe/e8_top2_norm"}};
  return c;
}
std::string adapter_dir(const Case& c) { return source_path("tests/fixtures/lora/" + c.name + "/adapter"); }
ckpt::SafetensorsFile expected(const Case& c) {
  return ckpt::SafetensorsFile::open(source_path("tests/fixtures/lora/" + c.name + "/expected.safetensors"));
}
std::unique_ptr<nn::Decoder> load(const Case& c) {
  const std::string base = source_path(c.base);
  return models::load_hf_model_with_adapter(models::family_of_hf_folder(base), base, adapter_dir(c));
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = testing::to_doubles(a), y = testing::to_doubles(b);
  EXPECT_EQ(x.size(), y.size());
  double m = 0.0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

// y = x W^T + b + s (x A^T) B^T and its gradients, in float64 from the formula.
TEST(Lora, ModuleMatchesTheFormulaForwardAndBackward) {
  const int64_t n = 5, in = 12, out = 7, r = 3;
  nn::LoraLinearConfig config;
  config.in_features = in;
  config.out_features = out;
  config.bias = true;
  config.rank = r;
  config.alpha = 6.0;  // scale 2
  std::unique_ptr<nn::LoraLinear> lora;
  {
    nn::FrozenParameterScope frozen(DType::f32);
    lora = std::make_unique<nn::LoraLinear>(config, "p");
  }
  EXPECT_FALSE(lora->weight.trainable);
  EXPECT_FALSE(lora->weight.grad.defined());
  EXPECT_FALSE(lora->bias.grad.defined());
  EXPECT_TRUE(lora->lora_A.trainable && lora->lora_B.trainable);
  lora->weight.value.copy_from(testing::random_f32({out, in}, 1));
  lora->bias.value.copy_from(testing::random_f32({out}, 2));
  lora->lora_A.value.copy_from(testing::random_f32({r, in}, 3));
  lora->lora_B.value.copy_from(testing::random_f32({out, r}, 4));
  const Tensor x = testing::random_f32({n, in}, 5), dy = testing::random_f32({n, out}, 6);
  nn::LinearModule::Saved saved;
  const Tensor y = lora->forward(x, saved);
  const Tensor dx = lora->backward(dy, saved);

  const auto W = testing::to_doubles(lora->weight.value), b = testing::to_doubles(lora->bias.value),
             A = testing::to_doubles(lora->lora_A.value), B = testing::to_doubles(lora->lora_B.value),
             X = testing::to_doubles(x), DY = testing::to_doubles(dy);
  const double s = 2.0;
  std::vector<double> u(n * r, 0.0), ye(n * out), dxe(n * in, 0.0), dA(r * in, 0.0), dB(out * r, 0.0), du(n * r, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < r; ++k) {
      for (int64_t j = 0; j < in; ++j) u[i * r + k] += s * X[i * in + j] * A[k * in + j];
    }
    for (int64_t o = 0; o < out; ++o) {
      double acc = b[o];
      for (int64_t j = 0; j < in; ++j) acc += X[i * in + j] * W[o * in + j];
      for (int64_t k = 0; k < r; ++k) acc += u[i * r + k] * B[o * r + k];
      ye[i * out + o] = acc;
    }
    for (int64_t k = 0; k < r; ++k) {
      for (int64_t o = 0; o < out; ++o) du[i * r + k] += s * DY[i * out + o] * B[o * r + k];
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < in; ++j) {
      double acc = 0.0;
      for (int64_t o = 0; o < out; ++o) acc += DY[i * out + o] * W[o * in + j];
      for (int64_t k = 0; k < r; ++k) acc += du[i * r + k] * A[k * in + j];
      dxe[i * in + j] = acc;
    }
  }
  for (int64_t k = 0; k < r; ++k) {
    for (int64_t j = 0; j < in; ++j) {
      for (int64_t i = 0; i < n; ++i) dA[k * in + j] += du[i * r + k] * X[i * in + j];
    }
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t i = 0; i < n; ++i) dB[o * r + k] += DY[i * out + o] * u[i * r + k];
    }
  }
  const testing::Tolerance tol{1e-5, 1e-5};
  EXPECT_TRUE(testing::all_close("y", testing::to_doubles(y), ye, tol));
  EXPECT_TRUE(testing::all_close("dx", testing::to_doubles(dx), dxe, tol));
  EXPECT_TRUE(testing::all_close("dA", testing::to_doubles(lora->lora_A.grad), dA, tol));
  EXPECT_TRUE(testing::all_close("dB", testing::to_doubles(lora->lora_B.grad), dB, tol));
}

// lora.dropout: PEFT's LoRA layer in training mode (lora_dropout 0.25) with the mask titan draws
// for the module "proj" under a fixed key (tools/make_lora_dropout_fixture.py reimplements the
// draw): forward and every gradient equal PEFT's; no key (validation, generation) drops nothing.
TEST(Lora, DropoutEqualsPeftWithTheSameMask) {
  const std::string dir = source_path("tests/fixtures/lora/dropout_module");
  std::ifstream in(dir + "/case.json");
  const nlohmann::json c = nlohmann::json::parse(in);
  const ckpt::SafetensorsFile f = ckpt::SafetensorsFile::open(dir + "/expected.safetensors");
  const Tensor x = f.get("x").clone(), dy = f.get("dy").clone();
  nn::LoraLinearConfig config;
  config.in_features = x.size(1);
  config.out_features = dy.size(1);
  config.bias = true;
  config.rank = c["r"].get<int64_t>();
  config.alpha = c["alpha"].get<double>();
  config.dropout = c["p"].get<double>();
  std::unique_ptr<nn::LoraLinear> lora;
  {
    nn::FrozenParameterScope frozen(DType::f32);
    lora = std::make_unique<nn::LoraLinear>(config, c["fqn"].get<std::string>());
  }
  lora->weight.value.copy_from(f.get("weight"));
  lora->bias.value.copy_from(f.get("bias"));
  lora->lora_A.value.copy_from(f.get("lora_A"));
  lora->lora_B.value.copy_from(f.get("lora_B"));
  nn::set_lora_dropout_key(nn::LoraDropoutKey{c["seed"].get<uint64_t>(), c["step"].get<int64_t>(),
                                              c["micro"].get<int64_t>(), c["rank"].get<int64_t>()});
  nn::LinearModule::Saved saved;
  const Tensor y = lora->forward(x, saved);
  const Tensor dx = lora->backward(dy, saved);
  nn::set_lora_dropout_key(std::nullopt);
  const testing::Tolerance tol{1e-5, 1e-5};
  EXPECT_TRUE(testing::all_close("y", testing::to_doubles(y), testing::to_doubles(f.get("y")), tol));
  EXPECT_TRUE(testing::all_close("dx", testing::to_doubles(dx), testing::to_doubles(f.get("dx")), tol));
  EXPECT_TRUE(testing::all_close("dA", testing::to_doubles(lora->lora_A.grad), testing::to_doubles(f.get("dA")), tol));
  EXPECT_TRUE(testing::all_close("dB", testing::to_doubles(lora->lora_B.grad), testing::to_doubles(f.get("dB")), tol));

  // Without a key the adapter sees x whole: y = x W^T + b + s (x A^T) B^T, not PEFT's training output.
  nn::LinearModule::Saved eval;
  const Tensor y_eval = lora->forward(x, eval);
  EXPECT_GT(max_abs_diff(y_eval, f.get("y")), 1e-3);
  lora->backward(dy, eval);
}

// LoRA on stacked experts (lora.target_parameters): the four adapter tensors' gradients, in PEFT's
// interleaved layouts, against central finite differences of <dy, y> through the module's forward
// (the forward itself equals PEFT's in PeftAdaptersGiveThePeftModelsLogits, case moe_experts).
TEST(Lora, ExpertAdaptersBackwardMatchesFiniteDifferences) {
  const int64_t experts = 3, d = 8, f = 6, r = 2, rows = 7;
  nn::LoraExpertsConfig config;
  config.dim = d;
  config.hidden_dim = f;
  config.num_experts = experts;
  config.rank = r;
  config.alpha = 4.0;
  std::unique_ptr<nn::LoraExperts> m;
  {
    nn::FrozenParameterScope frozen(DType::f32);
    m = std::make_unique<nn::LoraExperts>(config, "layers.0.moe.experts");
  }
  EXPECT_FALSE(m->w1.trainable);
  uint64_t seed = 10;
  for (nn::Parameter* p : {&m->w1, &m->w2, &m->w3, &m->gate_up_A, &m->gate_up_B, &m->down_A, &m->down_B}) {
    p->value.copy_from(testing::random_f32(p->value.shape(), ++seed, 0.5f));
  }
  const Tensor x = testing::random_f32({rows, d}, 30), dy = testing::random_f32({rows, d}, 31);
  Tensor offsets = Tensor::empty({experts + 1}, DType::i64);
  // Rows 0-1 to expert 0, none to expert 1, rows 2-6 to expert 2.
  for (const auto& [i, v] : {std::pair{0, 0}, {1, 2}, {2, 2}, {3, 7}}) offsets.data<int64_t>()[i] = v;
  const auto objective = [&] {
    std::any saved;
    const Tensor y = m->forward(x, offsets, saved);
    double sum = 0.0;
    for (int64_t i = 0; i < y.numel(); ++i) sum += static_cast<double>(y.data<float>()[i]) * dy.data<float>()[i];
    return sum;
  };
  std::any saved;
  m->forward(x, offsets, saved);
  Tensor dx = Tensor::empty({rows, d}), none;
  m->backward(dy, none, none, x, offsets, saved, dx, none);
  int compared = 0;
  for (nn::Parameter* p : {&m->gate_up_A, &m->gate_up_B, &m->down_A, &m->down_B}) {
    for (int64_t i = 0; i < p->value.numel(); i += 3) {
      float& v = p->value.data<float>()[i];
      const float keep = v, eps = 5e-3f;
      v = keep + eps;
      const double up = objective();
      v = keep - eps;
      const double down = objective();
      v = keep;
      const double numeric = (up - down) / (2.0 * eps), analytic = p->grad.data<float>()[i];
      EXPECT_NEAR(analytic, numeric, 2e-3 + 2e-3 * std::fabs(numeric)) << p->fqn << "[" << i << "]";
      ++compared;
    }
  }
  EXPECT_GT(compared, 40);
}

TEST(Lora, FrozenScopeStoresTheBaseInBf16WithoutGradients) {
  nn::DecoderConfig c;
  c.vocab_size = 64;
  c.dim = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.hidden_dim = 48;
  nn::ConfigTree tree = nn::decoder_config_tree(c);
  plugins::LoraOptions o;
  o.rank = 2;
  o.target_modules = {"q_proj", "down_proj"};
  const std::vector<plugins::Replacement> done = plugins::apply_overrides(tree, {plugins::lora_override(o)});
  ASSERT_EQ(done.size(), 4u);  // two layers x {wq, w2}
  EXPECT_EQ(done[0].path, "model.layers.0.attention.wq");
  EXPECT_EQ(done[1].path, "model.layers.0.feed_forward.w2");
  std::unique_ptr<nn::Decoder> model;
  {
    nn::FrozenParameterScope frozen(DType::bf16);
    model = std::make_unique<nn::Decoder>(c, tree);
  }
  int64_t adapters = 0;
  for (const nn::Parameter* p : model->parameters()) {
    if (nn::is_lora_parameter(p->fqn)) {
      ++adapters;
      EXPECT_TRUE(p->trainable && p->grad.defined() && p->value.dtype() == DType::f32) << p->fqn;
    } else {
      EXPECT_FALSE(p->trainable || p->grad.defined() || p->value.defined()) << p->fqn;
      EXPECT_EQ(p->compute.dtype(), DType::bf16) << p->fqn;
    }
  }
  EXPECT_EQ(adapters, 8);
  EXPECT_EQ(nn::trainable(model->parameters()).size(), 8u);
}

TEST(Lora, TargetModulesAcceptPeftNamesAllLinearAndGlobs) {
  // all-linear: q, k, v, o; gate, up, down of the dense MLP and of a shared expert; the shared
  // expert's gate; the gated DeltaNet's in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj.
  EXPECT_EQ(plugins::lora_target_patterns({"all-linear"}).size(), 16u);
  EXPECT_EQ(plugins::lora_target_patterns({"in_proj_qkv"}),
            std::vector<std::string>{"model.layers.*.attention.in_proj_qkv"});
  EXPECT_EQ(plugins::lora_target_patterns({"gate_proj"}),
            (std::vector<std::string>{"model.layers.*.feed_forward.w1", "model.layers.*.moe.shared_expert.w1"}));
  EXPECT_EQ(plugins::lora_target_patterns({"v_proj"}), std::vector<std::string>{"model.layers.*.attention.wv"});
  EXPECT_EQ(plugins::lora_target_patterns({"layers.1.feed_forward.w*"}),
            std::vector<std::string>{"model.layers.1.feed_forward.w*"});
  EXPECT_ERROR_CONTAINS(plugins::lora_target_patterns({"qproj"}), "target module 'qproj' is not a PEFT name");
  plugins::LoraOptions o;
  EXPECT_ERROR_CONTAINS(plugins::lora_override(o), "lora.rank 0 must be >= 1");
}

// A model with fresh adapters (B = 0) is its base model, to the bit.
TEST(Lora, FreshAdaptersLeaveTheModelUnchanged) {
  const std::string base = source_path("tests/fixtures/hf/untied_gqa2");
  const models::ModelSpec& spec = models::family_of_hf_folder(base);
  std::unique_ptr<nn::Decoder> plain = models::load_hf_model(spec, base);
  const nn::DecoderConfig config = spec.hf.read_config(base);
  nn::ConfigTree tree = nn::decoder_config_tree(config);
  plugins::LoraOptions o;
  o.rank = 4;
  plugins::apply_overrides(tree, {plugins::lora_override(o)});
  std::unique_ptr<nn::Decoder> lora;
  {
    nn::FrozenParameterScope frozen(DType::f32);
    lora = spec.build(config, tree);
  }
  spec.init_weights(*lora, 7);
  spec.hf.load_weights(*lora, base);
  const Tensor ids = expected(cases()[0]).get("input_ids").clone();
  const Tensor a = plain->forward_logits(ids), b = lora->forward_logits(ids);
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0);
}

// The path of the file whose mapping holds `p` (/proc/self/maps), or "" for anonymous memory.
std::string mapping_of(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &begin, &end) != 2 || addr < begin || addr >= end) continue;
    const size_t slash = line.find('/');
    return slash == std::string::npos ? "" : line.substr(slash);
  }
  return "";
}

// A frozen base weight stored in the folder's dtype is the mapped file itself, not a copy (only the
// pages a step reads are resident: the embedding rows of the batch), and holds the file's values;
// quantized weights, adapters and converted dtypes are the process's own memory.
TEST(Lora, FrozenBaseInTheFilesDtypeReadsTheMappedFile) {
  TempDir dir("mapped");
  const std::string f32_dir = source_path("tests/fixtures/hf/untied_gqa2");
  fs::copy_file(f32_dir + "/config.json", dir / "config.json");
  {
    const auto f32 = ckpt::SafetensorsFile::open(f32_dir + "/model.safetensors");
    std::vector<std::pair<std::string, Tensor>> bf16;
    for (const ckpt::TensorInfo& t : f32.tensors()) bf16.emplace_back(t.name, f32.get(t.name).to(DType::bf16));
    ckpt::write_safetensors(dir / "model.safetensors", bf16, {{"format", "pt"}});
  }
  const std::string bf16_file = fs::canonical(dir / "model.safetensors").string();
  const auto bf16 = ckpt::SafetensorsFile::open(bf16_file);
  const models::ModelSpec& spec = models::family_of_hf_folder(f32_dir);
  const nn::DecoderConfig config = spec.hf.read_config(f32_dir);
  nn::ConfigTree tree = nn::decoder_config_tree(config);
  plugins::LoraOptions o;
  o.rank = 2;
  plugins::apply_overrides(tree, {plugins::lora_override(o)});
  for (const std::optional<ops::QuantKind> quant : {std::optional<ops::QuantKind>{}, std::optional{ops::QuantKind::nf4}}) {
    for (const std::string& folder : {dir / "", f32_dir}) {
      SCOPED_TRACE(folder + (quant ? " nf4" : " bf16"));
      std::unique_ptr<nn::Decoder> model;
      {
        nn::FrozenParameterScope frozen(DType::bf16, quant);
        model = spec.build(config, tree);
      }
      spec.hf.load_weights(*model, folder);
      int quantized = 0;
      for (const nn::Parameter* p : model->parameters()) {
        const Tensor& own = nn::is_lora_parameter(p->fqn) ? p->value : p->quantized() ? p->codes : p->compute;
        const std::string where = mapping_of(own.raw_data());
        quantized += p->quantized();
        if (folder == f32_dir || nn::is_lora_parameter(p->fqn) || p->quantized()) {
          EXPECT_EQ(where, "") << p->fqn;
          continue;
        }
        EXPECT_EQ(where, bf16_file) << p->fqn;
        const auto [hf, view] = models::to_hf_tensors(p->fqn, p->compute).at(0);
        const Tensor stored = bf16.get(hf);
        ASSERT_EQ(stored.nbytes(), own.nbytes()) << p->fqn;
        EXPECT_EQ(std::memcmp(stored.raw_data(), own.raw_data(), own.nbytes()), 0) << p->fqn;
      }
      EXPECT_EQ(quantized, quant ? 7 * config.num_layers : 0);
    }
  }
}

// Adapters PEFT trained (random lora_B) on the tiny HF fixtures: titan's logits equal PeftModel's.
TEST(Lora, PeftAdaptersGiveThePeftModelsLogits) {
  for (const Case& c : cases()) {
    std::unique_ptr<nn::Decoder> model = load(c);
    const ckpt::SafetensorsFile want = expected(c);
    const Tensor ids = want.get("input_ids").clone();
    const double err = max_abs_diff(model->forward_logits(ids), want.get("logits"));
    std::printf("[ lora     ] %s: logits max abs err vs PEFT %.2e\n", c.name.c_str(), err);
    EXPECT_LT(err, 2e-4) << c.name;
  }
}

// An edited adapter_config.json over a file with more tensors than it selects (issue 49's sweep,
// item 13): PEFT adapts only layers_to_transform's layers and target_modules' modules (a name the
// model lacks beside one it has is no error there) and ignores the other tensors; titan gives
// PeftModel.from_pretrained's logits. A config that selects nothing is refused, as PEFT refuses.
TEST(Lora, AdapterConfigSelectsTheModulesAsPeftDoes) {
  for (const char* name : {"dense_all_linear_layer1", "dense_all_linear_q_only"}) {
    const Case c{name, "tests/fixtures/hf/untied_gqa2"};
    std::unique_ptr<nn::Decoder> model = load(c);
    const ckpt::SafetensorsFile want = expected(c);
    const Tensor ids = want.get("input_ids").clone();
    const double err = max_abs_diff(model->forward_logits(ids), want.get("logits"));
    std::printf("[ lora     ] %s: logits max abs err vs PEFT %.2e\n", name, err);
    EXPECT_LT(err, 2e-4) << name;
  }
  TempDir dir("select_none");
  fs::copy(source_path("tests/fixtures/lora/dense_all_linear/adapter"), dir / "a");
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / "a/adapter_config.json"));
  config["target_modules"] = {"no_such_proj"};
  std::ofstream(dir / "a/adapter_config.json") << config.dump();
  const std::string base = source_path("tests/fixtures/hf/untied_gqa2");
  const std::string error = testing::error_of(
      [&] { models::load_hf_model_with_adapter(models::family_of_hf_folder(base), base, dir / "a"); });
  EXPECT_NE(error.find("target_modules and layers_to_transform select none of the 14 modules"), std::string::npos)
      << error;
}

// The merged HF export equals PEFT's merge_and_unload(), and base + (alpha / r) B A in float64.
TEST(Lora, MergedExportEqualsBasePlusScaledBA) {
  for (const Case& c : cases()) {
    std::unique_ptr<nn::Decoder> model = load(c);
    TempDir dir("merged_" + c.name);
    models::save_hf_folder(*model, dir / "hf");
    const ckpt::SafetensorsFile merged = ckpt::SafetensorsFile::open(dir / "hf/model.safetensors");
    const ckpt::SafetensorsFile want = expected(c);
    const ckpt::SafetensorsFile base = ckpt::SafetensorsFile::open(source_path(c.base) + "/model.safetensors");
    const ckpt::SafetensorsFile adapter = ckpt::SafetensorsFile::open(adapter_dir(c) + "/adapter_model.safetensors");
    const nlohmann::json ac = nlohmann::json::parse(std::ifstream(adapter_dir(c) + "/adapter_config.json"));
    const double scale = ac["lora_alpha"].get<double>() / ac["r"].get<double>();
    int checked = 0;
    for (const ckpt::TensorInfo& info : want.tensors()) {
      if (!info.name.starts_with("merged.")) continue;
      const std::string hf = info.name.substr(7);
      const double peft_err = max_abs_diff(merged.get(hf), want.get(info.name));
      EXPECT_LT(peft_err, 1e-6) << c.name << " " << hf;
      const std::string stem = "base_model.model." + hf.substr(0, hf.size() - 7);  // drop ".weight"
      const auto W = testing::to_doubles(base.get(hf)), A = testing::to_doubles(adapter.get(stem + ".lora_A.weight")),
                 B = testing::to_doubles(adapter.get(stem + ".lora_B.weight"));
      const int64_t out = base.find(hf)->shape[0], in = base.find(hf)->shape[1],
                    r = adapter.find(stem + ".lora_A.weight")->shape[0];
      std::vector<double> m(W);
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in; ++i) {
          for (int64_t k = 0; k < r; ++k) m[o * in + i] += scale * B[o * r + k] * A[k * in + i];
        }
      }
      EXPECT_TRUE(testing::all_close(hf, testing::to_doubles(merged.get(hf)), m, {1e-6, 1e-6}));
      ++checked;
    }
    EXPECT_GT(checked, 0) << c.name;
  }
}

// Greedy generation through the adapter (the KV-cache path runs LoraLinear like any linear)
// equals greedy generation of the merged export, token for token.
TEST(Lora, GenerationWithAnAdapterEqualsTheMergedModel) {
  const Case& c = cases()[0];
  std::unique_ptr<nn::Decoder> lora = load(c);
  TempDir dir("generate");
  models::save_hf_folder(*lora, dir / "hf");
  std::unique_ptr<nn::Decoder> merged = models::load_hf_model(models::family_of_hf_folder(dir / "hf"), dir / "hf");
  const Tensor ids = expected(c).get("input_ids").clone();
  nn::GenerateOptions options;
  options.max_new_tokens = 10;
  options.sampling.temperature = 0.0f;
  const std::vector<int64_t> begin(static_cast<size_t>(ids.size(0)), 0);
  const Tensor a = nn::generate(*lora, ids, begin, options), b = nn::generate(*merged, ids, begin, options);
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(testing::to_doubles(a), testing::to_doubles(b));
}

// titan's PEFT folder: PEFT's tensor names and values, r / lora_alpha, and exactly the adapted
// modules as target_modules; read back by titan it gives the same model (Qwen3's projections, and
// Qwen3.5's gated DeltaNet and gated attention ones).
TEST(Lora, SavedAdapterIsAPeftFolderThatReadsBack) {
  for (const Case& c : {cases()[0], cases()[3], cases()[5]}) {  // moe_experts: target_parameters too
    SCOPED_TRACE(c.name);
    std::unique_ptr<nn::Decoder> model = load(c);
    const nlohmann::json theirs = nlohmann::json::parse(std::ifstream(adapter_dir(c) + "/adapter_config.json"));
    const int64_t rank = theirs["r"].get<int64_t>();
    const double alpha = theirs["lora_alpha"].get<double>();
    TempDir dir("save_" + c.name);
    models::save_peft_adapter(*model, {"adapter", dir / "adapter", ckpt::FolderKind::peft_adapter}, rank, alpha, "base");
    const ckpt::SafetensorsFile ours = ckpt::SafetensorsFile::open(dir / "adapter/adapter_model.safetensors");
    const ckpt::SafetensorsFile peft = ckpt::SafetensorsFile::open(adapter_dir(c) + "/adapter_model.safetensors");
    ASSERT_EQ(ours.tensors().size(), peft.tensors().size());
    for (const ckpt::TensorInfo& info : peft.tensors()) {
      ASSERT_NE(ours.find(info.name), nullptr) << info.name;
      EXPECT_EQ(max_abs_diff(ours.get(info.name), peft.get(info.name)), 0.0) << info.name;
    }
    const nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / "adapter/adapter_config.json"));
    EXPECT_EQ(config["peft_type"], "LORA");
    EXPECT_EQ(config["r"], rank);
    EXPECT_EQ(config["lora_alpha"], alpha);
    size_t expert_tensors = 0;
    for (const ckpt::TensorInfo& info : ours.tensors()) {
      expert_tensors += info.name.find(".mlp.experts.") != std::string::npos;
    }
    const size_t projections = (ours.tensors().size() - expert_tensors) / 2;
    EXPECT_EQ(config["target_modules"].size(), projections);
    EXPECT_EQ(config.value("target_parameters", nlohmann::json()), theirs.value("target_parameters", nlohmann::json()));
    const models::PeftAdapter back = models::read_peft_adapter(dir / "adapter");
    EXPECT_EQ(back.rank, rank);
    EXPECT_EQ(back.modules.size(), projections);
    EXPECT_EQ(back.experts.size(), expert_tensors / 4);
    EXPECT_EQ(nn::lora_experts(*model).size(), expert_tensors / 4);
  }
}

TEST(Lora, BadAdaptersAreOneLineErrors) {
  const Case& dense = cases()[0];
  // An adapter made for another base: the first shape that differs is named.
  const std::string other = source_path("tests/fixtures/hf/gqa4_headdim");
  EXPECT_ERROR_CONTAINS(models::load_hf_model_with_adapter(models::family_of_hf_folder(other), other, adapter_dir(dense)),
                        "HINT: the adapter was trained on another base model");
  TempDir dir("bad");
  EXPECT_ERROR_CONTAINS(models::read_peft_adapter(dir / "none"), "adapter_config.json does not exist");
  fs::create_directories(dir / "dora");
  fs::copy_file(adapter_dir(dense) + "/adapter_model.safetensors", dir / "dora/adapter_model.safetensors");
  nlohmann::json c = nlohmann::json::parse(std::ifstream(adapter_dir(dense) + "/adapter_config.json"));
  c["use_dora"] = true;
  std::ofstream(dir / "dora/adapter_config.json") << c.dump();
  EXPECT_ERROR_CONTAINS(models::read_peft_adapter(dir / "dora"), "use_dora is true");
  c["use_dora"] = false;
  c["peft_type"] = "IA3";
  std::ofstream(dir / "dora/adapter_config.json") << c.dump();
  EXPECT_ERROR_CONTAINS(models::read_peft_adapter(dir / "dora"), "peft_type is not \"LORA\"");
}

}  // namespace
}  // namespace titan
