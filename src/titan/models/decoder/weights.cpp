#include "titan/models/decoder/weights.h"

#include <cmath>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>

#include "titan/checkpoint/hf_folder.h"
#include "titan/checkpoint/json_file.h"
#include "titan/core/progress.h"
#include "titan/core/rng.h"
#include "titan/models/decoder/gguf_model.h"
#include "titan/models/decoder/hf_config.h"
#include "titan/models/decoder/hf_names.h"
#include "titan/nn/lora.h"

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

// The depth-scaled std of layer `layer` (torchtitan: 0.02 / sqrt(2 (layer + 1))).
static float depth_std(int64_t layer) { return 0.02f / std::sqrt(2.0f * static_cast<float>(layer + 1)); }

// The layer index of "layers.<i>.<rest>", -1 for a root parameter.
static int64_t layer_of(const std::string& fqn) {
  if (!fqn.starts_with("layers.")) return -1;
  return std::stoll(fqn.substr(7, fqn.find('.', 7) - 7));
}

// torchtitan's init, by parameter name (so any module holding the built-in FQNs inits the same;
// each tensor has its own random stream, keyed by its FQN): projections N(0, 0.02) truncated at
// +-2, the ones that write into the residual (wo, w2, w3; the experts' w2, w3) depth-scaled; norm
// weights 1, biases 0; the head N(0, 1/sqrt(dim)) truncated at +-3 std, an untied embedding N(0, 1);
// LoRA adapters as PEFT (nn::init_lora_parameter).
void init_weights(nn::Decoder& model, uint64_t seed) {
  const auto stream = [](const std::string& fqn) { return std::hash<std::string>{}(fqn); };
  const nn::ParameterList params = model.parameters();
  Progress progress("initializing weights", static_cast<int64_t>(params.size()), "tensors");
  nn::Parameter& head = model.head_weight();
  const float head_std = 1.0f / std::sqrt(static_cast<float>(model.config().dim));
  for (nn::Parameter* p : params) {
    progress.advance();
    const std::string& f = p->fqn;
    // A frozen base stored in bf16 is drawn in f32 and rounded (the same numbers).
    Tensor value = p->value.defined() ? p->value : Tensor::empty(p->shape());
    value.zero_();
    if (p == &head) {
      fill_trunc_normal(value, Rng(seed, stream(f)), head_std, -3 * head_std, 3 * head_std);
    } else if (f == "tok_embeddings.weight") {
      Rng(seed, stream(f)).fill_normal(value.data<float>(), value.numel(), 0.0f, 1.0f);
    } else if (f.ends_with(".attention.norm.weight")) {
      value.fill_(1.0f);  // a gated DeltaNet's output norm (plain, x * w)
    } else if (f.ends_with("norm.weight")) {
      value.fill_(model.config().zero_centered_norms ? 0.0f : 1.0f);  // x * (1 + w): w = 0
    } else if (f.ends_with(".attention.A_log")) {
      // Transformers' Qwen3_5GatedDeltaNet: A uniform in [0.01, 16), stored as log A.
      Rng(seed, stream(f)).fill_uniform(value.data<float>(), value.numel(), 1.0f);
      for (int64_t i = 0; i < value.numel(); ++i) {
        value.data<float>()[i] = std::log(0.01f + (value.data<float>()[i] + 1.0f) * 0.5f * 15.99f);
      }
    } else if (f.ends_with(".attention.dt_bias")) {
      value.fill_(1.0f);
    } else if (nn::is_lora_parameter(f)) {
      nn::init_lora_parameter(*p, seed);  // PEFT's: A kaiming-uniform, B zero
      continue;
    } else if (f.ends_with(".bias")) {
      // biases start at 0
    } else {
      const bool residual = f.ends_with(".wo.weight") || f.ends_with(".w2.weight") || f.ends_with(".w3.weight") ||
                            f.ends_with(".experts.w2") || f.ends_with(".experts.w3") || f.ends_with(".out_proj.weight");
      const bool input = f.ends_with(".wq.weight") || f.ends_with(".wk.weight") || f.ends_with(".wv.weight") ||
                         f.ends_with(".w1.weight") || f.ends_with(".router.gate.weight") || f.ends_with(".experts.w1") ||
                         f.ends_with(".in_proj_qkv.weight") || f.ends_with(".in_proj_z.weight") ||
                         f.ends_with(".in_proj_b.weight") || f.ends_with(".in_proj_a.weight") ||
                         f.ends_with(".conv1d.weight") || f.ends_with(".shared_expert_gate.weight");
      TITAN_CHECK(residual || input, "[model] no initialization rule for parameter ", f,
                  ". HINT: a module must keep the built-in parameter names (nn/module.h)");
      const float std = residual ? depth_std(layer_of(f)) : 0.02f;
      fill_trunc_normal(value, Rng(seed, stream(f)), std, -2.0f, 2.0f);
    }
    if (!p->value.defined()) p->assign(value);
  }
  for (nn::Parameter* b : model.buffers()) b->value.zero_();  // the experts' selection bias starts at 0
}

nn::DecoderConfig load_hf_config(const std::string& dir) {
  if (ckpt::is_gguf_file(dir)) return GgufModel::open(dir)->decoder_config();
  const std::string path = dir + "/config.json";
  return config_from_hf(ckpt::read_json_file(path), path);
}

// The flat index of `t`'s first NaN or infinity (f32 or bf16), or -1.
static int64_t first_nonfinite(const Tensor& t) {
  const int64_t n = t.numel();
  if (t.dtype() == DType::bf16) {
    const uint16_t* p = t.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) {
      if ((p[i] & 0x7f80u) == 0x7f80u) return i;  // exponent all ones: inf or NaN
    }
    return -1;
  }
  const float* p = t.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(p[i])) return i;
  }
  return -1;
}

// Where a folder keeps the language model's tensors. A multimodal Qwen3.5 folder
// (Qwen3_5(Moe)ForConditionalGeneration) holds them under model.language_model.* beside its vision
// tower (model.visual.*); Qwen3.5 folders may carry multi-token-prediction tensors (mtp.*), which
// Transformers ignores too. Neither is part of the text model titan trains.
struct FolderLayout {
  std::string model_prefix = "model.";
  std::vector<std::string> ignored_prefixes;
  std::string hf_name(const std::string& text_name) const {
    return text_name.starts_with("model.") ? model_prefix + text_name.substr(6) : text_name;
  }
};

static FolderLayout folder_layout(const nn::DecoderConfig& config, const std::string& dir) {
  FolderLayout layout;
  if (!config.attn_output_gate) return layout;  // not a Qwen3.5 model
  layout.ignored_prefixes = {"mtp."};
  const std::string path = dir + "/config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return layout;
  const nlohmann::json j = ckpt::read_json_file(path);
  if (j.is_object() && j.contains("architectures") &&
      (j["architectures"] == nlohmann::json{"Qwen3_5ForConditionalGeneration"} ||
       j["architectures"] == nlohmann::json{"Qwen3_5MoeForConditionalGeneration"})) {
    layout.model_prefix = "model.language_model.";
    layout.ignored_prefixes.push_back("model.visual.");
  }
  return layout;
}

// Whether a weight reads the folder's mapped file instead of a copy: a frozen, unquantized
// parameter (a LoRA base's embedding, head and norms; every base weight when not quantized) stored
// in the file's dtype, whose whole tensor is this one file tensor. Nothing writes a frozen weight,
// so its pages stay the page cache's: a process holds only the ones it reads (the frozen
// embedding hands its pages back after each lookup, nn/embedding.cpp, so it keeps no more than a
// batch's rows of a 151,936-row table) and the kernel may drop and re-read them under pressure.
// The mapping lives as long as the weight (SafetensorsFile's shared handle).
static bool maps_file(const nn::Parameter& p, const Tensor& dst, DType stored) {
  return !p.trainable && !p.quantized() && !p.value.defined() && p.compute.defined() &&
         p.compute.dtype() == stored && dst.raw_data() == p.compute.raw_data() &&
         dst.numel() == p.compute.numel() && p.compute.device() == Device::cpu;
}

// lora.base_quantization=gguf: a base weight keeps the GGUF file's blocks as they are stored (its
// q/k row order undone); a tensor the file holds unquantized (f32/f16/bf16) is encoded as q8_0.
static void load_gguf_blocks(nn::Parameter& p, const ckpt::TensorSource& weights, const std::string& dir,
                             std::vector<std::string>& missing, std::set<std::string>& unused) {
  const auto* gguf = dynamic_cast<const GgufWeights*>(&weights);
  TITAN_CHECK(gguf != nullptr, dir, ": lora.base_quantization=gguf keeps a GGUF file's quantized blocks, but the "
              "weights come from a folder. HINT: start from a .gguf file, or use lora.base_quantization nf4 or int8");
  const std::string hf = to_hf_name(p.fqn);
  const ckpt::TensorInfo* info = weights.find(hf);
  if (info == nullptr) {
    missing.push_back(hf);
    return;
  }
  TITAN_CHECK(info->shape == p.shape(), weights.file_of(hf), ": tensor '", hf, "' has shape ", shape_str(info->shape),
              ", the model expects ", shape_str(p.shape()), ". HINT: check that the file matches the model");
  GgmlType type = GgmlType::f32;
  Tensor blocks = gguf->model().read_blocks(hf, &type);
  if (ggml_type_info(type).block > 1) {
    p.codes = blocks;
    p.scales.data<float>()[0] = static_cast<float>(type);
  } else {
    p.assign(gguf->get(hf));  // q8_0 (the scales' type since init)
  }
  weights.release(hf);
  unused.erase(hf);
}

void load_hf_weights(nn::Decoder& model, const std::string& dir) {
  const std::unique_ptr<ckpt::TensorSource> source = open_weights(dir);
  const ckpt::TensorSource& weights = *source;
  const FolderLayout layout = folder_layout(model.config(), dir);
  std::set<std::string> unused;
  for (const std::string& name : weights.names()) {
    const bool ignored = std::any_of(layout.ignored_prefixes.begin(), layout.ignored_prefixes.end(),
                                     [&](const std::string& p) { return name.starts_with(p); });
    if (!ignored) unused.insert(name);
  }

  std::vector<std::string> missing;
  const nn::ParameterList params = model.parameters();
  Progress progress("loading weights from " + dir, static_cast<int64_t>(params.size()), "tensors");
  for (nn::Parameter* p : params) {
    progress.advance();
    if (nn::is_lora_parameter(p->fqn)) continue;  // adapters are not in a base model's folder
    if (p->quantized() && p->quant_kind == ops::QuantKind::gguf) {
      load_gguf_blocks(*p, weights, dir, missing, unused);
      continue;
    }
    // A quantized base weight is read into an f32 staging copy of this one tensor, then quantized.
    const Tensor staging = p->quantized() ? Tensor::empty(p->shape()) : Tensor();
    for (auto& [text_name, dst] : to_hf_tensors(p->fqn, p->quantized() ? staging : p->data())) {
      const std::string hf = layout.hf_name(text_name);
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
      const bool mapped = maps_file(*p, dst, info->dtype);
      if (mapped) {
        p->compute = weights.get(hf);  // the file's bytes themselves: see maps_file
      } else {
        dst.copy_from(weights.get(hf));  // dst is a view: an expert's slice of a stacked weight
      }
      const Tensor& loaded = mapped ? p->compute : dst;
      const int64_t bad = first_nonfinite(loaded);
      weights.release(hf);  // its pages leave this process (a mapped weight's come back as they are read)
      if (bad >= 0) {
        const float v =
            loaded.dtype() == DType::bf16 ? bf16_to_f32(loaded.data<uint16_t>()[bad]) : loaded.data<float>()[bad];
        TITAN_FAIL(weights.file_of(hf), ": tensor '", hf, "' holds ", v, " at flat index ", bad,
                   ". HINT: the checkpoint is corrupt or was saved after training diverged; use another one");
      }
      unused.erase(hf);
    }
    if (p->quantized() && missing.empty()) p->assign(staging);
  }
  if (model.config().tie_embeddings && unused.count("lm_head.weight")) {
    // Some exports store the tied head anyway; accept it only if it really is the embedding.
    const Tensor& emb = model.tok_embeddings->table().data();  // f32, or bf16 for a frozen base
    const Tensor head = weights.get("lm_head.weight").to(emb.dtype());
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
  TITAN_CHECK(missing.empty(), dir, ": missing weights for this model's config: ", join(missing),
              ". HINT: check num_hidden_layers / tie_word_embeddings / attention_bias / layer_types in config.json");
  TITAN_CHECK(unused.empty(), dir, ": unexpected weights not in this model's config: ", join(unused),
              ". HINT: check config.json against the checkpoint");
}

std::unique_ptr<nn::Decoder> load_hf_model(const std::string& dir) {
  auto model = std::make_unique<nn::Decoder>(load_hf_config(dir));
  load_hf_weights(*model, dir);
  return model;
}

}  // namespace titan::models
