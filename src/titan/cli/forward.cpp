// titan forward: the numerics command. Runs a Hugging Face model folder on given tokens and
// writes logits, the HF causal-LM loss (plus router_aux_loss_coef x the load-balancing aux loss
// for a mixture-of-experts config with output_router_logits, as Qwen3MoeForCausalLM adds it) and (with --grads) every parameter's gradient under its
// HF name, so any checkpoint can be compared against Transformers.
#include <cstdio>
#include <limits>

#include "titan/checkpoint/safetensors.h"
#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/cli/output_file.h"
#include "titan/cli/model_source.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/hf_checkpoint.h"
#include "titan/nn/lora.h"
#include "titan/train/precision.h"

namespace titan::cli {

int run_forward(int argc, char** argv) {
  const Args args("forward",
                  {{"model", "Hugging Face model folder (config.json + *.safetensors), a .gguf file or a checkpoint step-<N> folder", "", false, true},
                   {"tokens", "safetensors file with input_ids [B, T] (I64/I32) and optional labels [B, T] (-100: "
                    "ignored). Without labels the loss is Transformers' model(input_ids, labels=input_ids); with "
                    "every label -100 it is nan, as in Transformers", "", false, true},
                   {"out", "output safetensors file", "", false, true},
                   {"adapter", "PEFT LoRA adapter folder to apply on the model (adapter_config.json + "
                    "adapter_model.safetensors)", ""},
                   {"grads", "also write grad.<HF name> for every parameter", "", true},
                   {"base-quantization", "none | nf4 | int8 | gguf: with --adapter, store the base's linear weights "
                    "quantized as lora.base_quantization does (QLoRA) and compute with them decoded", "none"},
                   {"mixed-precision", "compute dtype, as training.mixed_precision_param: float32 or bfloat16",
                    "float32"}},
                  argc, argv, 2);
  if (args.help_requested()) {
    std::fputs(args.usage().c_str(), stdout);
    return 0;
  }
  check_output_file("forward", "out", args.get("out"));
  log_startup();
  const auto tokens = ckpt::SafetensorsFile::open(args.get("tokens"));
  const Tensor ids = read_token_ids(tokens, "input_ids");
  const Tensor labels = tokens.find("labels") ? read_token_ids(tokens, "labels") : ids;
  TITAN_CHECK(labels.shape() == ids.shape(), tokens.path(), ": labels ", labels.describe(),
              " must have the shape of input_ids ", ids.describe());

  const std::string precision = args.get("mixed-precision");
  if (precision != "float32" && precision != "bfloat16") {
    throw UsageError(str("titan forward: --mixed-precision ", precision, " is not float32 or bfloat16"));
  }
  const std::string quantization = args.get("base-quantization");
  std::optional<ops::QuantKind> base_quant;
  if (!ops::parse_base_quantization(quantization, base_quant)) {
    throw UsageError(str("titan forward: --base-quantization ", quantization, " is not none, nf4, int8 or gguf"));
  }
  if (base_quant && args.get("adapter").empty()) {
    throw UsageError("titan forward: --base-quantization needs --adapter (a quantized base is a frozen LoRA base)");
  }
  if (base_quant && args.get_bool("grads")) {
    throw UsageError("titan forward: --grads with --base-quantization: a quantized base is frozen and has no "
                     "gradients; drop one of them");
  }
  LoadedModel loaded = load_inference_model(args.get("model"), args.get("adapter"),
                                            {ids.size(0), 0, ids.size(1), "the rows or positions of --tokens"},
                                            base_quant);
  std::unique_ptr<nn::Decoder>& model = loaded.model;
  const models::ModelSpec& spec = *loaded.spec;
  model->set_compute_dtype(train::compute_dtype(train::parse_precision(precision)));
  const int64_t B = ids.size(0), T = ids.size(1), V = model->config().vocab_size;
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t id = ids.data<int64_t>()[i];
    TITAN_CHECK(id >= 0 && id < V, tokens.path(), ": input_ids[", i / T, ", ", i % T, "] = ", id,
                " is outside the vocabulary [0, ", V, ")");
  }
  // HF causal-LM loss: position t is scored against labels[t + 1]; the last has no target.
  Tensor targets = Tensor::empty({B, T}, DType::i64);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      targets.data<int64_t>()[b * T + t] = t + 1 < T ? labels.data<int64_t>()[b * T + t + 1] : -100;
    }
  }

  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back("logits", model->forward_logits(ids));
  nn::LossResult loss;
  if (args.get_bool("grads")) {
    model->zero_grad();
    loss = model->forward_backward(ids, targets);
  } else {
    loss = model->forward_loss(ids, targets);
  }
  // No target at all: the mean over zero targets, nan, as Transformers' cross-entropy gives.
  if (loss.num_targets == 0) loss.loss = std::numeric_limits<double>::quiet_NaN();
  Tensor loss_t = Tensor::empty({});
  loss_t.data<float>()[0] = static_cast<float>(loss.loss);
  out.emplace_back("loss", loss_t);
  if (model->config().num_experts > 0) {
    Tensor aux_t = Tensor::empty({});
    aux_t.data<float>()[0] = static_cast<float>(loss.sum(nn::kAuxLossTerm));
    out.emplace_back("aux_loss", aux_t);  // unscaled; in loss (x router_aux_loss_coef) with output_router_logits
  }
  if (args.get_bool("grads")) {
    // Under the folder's own names, as its export writes them (a multimodal folder's text model
    // is model.language_model.*).
    const std::string architecture = models::hf_architecture(args.get("model"));
    for (nn::Parameter* p : model->parameters()) {
      if (nn::is_lora_parameter(p->fqn)) continue;  // PEFT names are not HF parameter names
      for (const auto& [name, g] : spec.hf.to_hf_tensors(p->fqn, p->grad)) {
        out.emplace_back("grad." + models::folder_tensor_name(architecture, name), g);
      }
    }
  }
  ckpt::write_safetensors(args.get("out"), out, output_metadata("forward"));
  std::printf("loss %.6f over %ld targets; wrote %s\n", loss.loss, static_cast<long>(loss.num_targets),
              args.get("out").c_str());
  return 0;
}

}  // namespace titan::cli
