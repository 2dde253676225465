#include "titan/train/job.h"

#include <algorithm>
#include <utility>

#include "titan/checkpoint/gguf.h"
#include "titan/config/config_error.h"
#include "titan/config/validate.h"
#include "titan/models/builtin.h"
#include "titan/nn/lora.h"
#include "titan/plugins/override_registry.h"
#include "titan/plugins/plugin_loader.h"

namespace titan::train {

models::ResolvedModel resolve_model(const config::JobConfig& c) {
  models::ResolvedModel r = models::resolve_model(c.model.name, c.model.hf_assets_path, c.model.n_layers);
  nn::DecoderConfig& m = r.config;
  // Positions past max_position_embeddings were never trained (a scaled RoPE's max_position_embeddings
  // is already the extended length): a longer sequence is refused here, before anything is allocated.
  const std::string model_name = c.model.name.empty() ? c.model.hf_assets_path + "/config.json" : c.model.name;
  for (const auto& [field, len] : {std::pair<const char*, int64_t>{"training.seq_len", c.training.seq_len},
                                   {"validation.seq_len", c.validation.enable ? c.validation.seq_len : 0}}) {
    if (len > m.max_seq_len) {
      config::config_fail(field, "=", len, " is longer than the ", m.max_seq_len, " positions of model '", model_name,
                          "' (max_position_embeddings). HINT: ", field, " <= ", m.max_seq_len);
    }
  }
  const config::ModelSection& o = c.model;
  const bool moe_set = o.num_experts != 0 || o.top_k != 0 || !o.load_balance.empty() || o.router_aux_loss_coef >= 0;
  TITAN_CHECK(!moe_set || m.num_experts > 0, "[model] model.num_experts / top_k / load_balance / "
              "router_aux_loss_coef are set but model '", o.name.empty() ? o.hf_assets_path : o.name,
              "' is dense. HINT: pick a MoE spec (30B-A3B, 235B-A22B, debug_moe) or a Qwen3MoeForCausalLM folder");
  TITAN_CHECK(o.num_experts >= 0 && o.top_k >= 0, "[model] model.num_experts=", o.num_experts, " and model.top_k=",
              o.top_k, " must be >= 0 (0 = the spec's)");
  if (o.num_experts > 0) m.num_experts = o.num_experts;
  if (o.top_k > 0) m.num_experts_per_tok = o.top_k;
  if (!o.load_balance.empty()) m.load_balance = nn::parse_load_balance(o.load_balance);
  if (o.router_aux_loss_coef >= 0) m.router_aux_loss_coef = static_cast<float>(o.router_aux_loss_coef);
  m.bias_update_rate = static_cast<float>(o.load_balance_coeff);
  m.validate();
  return r;
}

nn::ConfigTree job_tree(const config::JobConfig& c, const models::ResolvedModel& model) {
  const plugins::LoadedPlugins loaded = plugins::load_plugins(plugins::split_imports(c.overrides.imports));
  std::vector<plugins::Override> overrides = loaded.overrides;  // opt-in: imported ones only
  nn::ConfigTree tree = model.spec->config_tree(model.config);
  if (c.lora.rank > 0) {
    const plugins::LoraOptions options = lora_options(c);
    as_config_error([&] { plugins::check_target_parameters(c.lora.target_parameters); return 0; });
    if (options.target_modules.empty() && c.lora.target_parameters.empty()) {
      config::config_fail("[lora] lora.target_modules and lora.target_parameters are both empty: nothing to adapt. ",
                          "HINT: all-linear, PEFT names such as q_proj,v_proj, or target_parameters ",
                          plugins::kExpertTargetParameters);
    }
    if (!options.target_modules.empty()) {
      const plugins::Override lora = as_config_error([&] { return plugins::lora_override(options); });
      // An adapter on nothing trains 0 parameters: a run that only looks like fine-tuning.
      if (plugins::matching_nodes(lora, tree).empty()) {
        config::config_fail("[lora] lora.target_modules='", c.lora.target_modules, "' matches no projection of ",
                            model_label(c), " (layers 0..", model.config.num_layers - 1,
                            "). HINT: PEFT names (", plugins::peft_module_names(), "), all-linear, or a glob such as "
                            "layers.*.attention.wq");
      }
      overrides.push_back(lora);
    }
    if (!c.lora.target_parameters.empty()) {
      const plugins::Override experts =
          as_config_error([&] { return plugins::lora_experts_override(options.rank, options.alpha); });
      if (plugins::matching_nodes(experts, tree).empty()) {
        config::config_fail("[lora] lora.target_parameters='", c.lora.target_parameters, "' adapts MoE experts, and ",
                            model_label(c), " has no MoE layer. HINT: leave lora.target_parameters empty");
      }
      overrides.push_back(experts);
    }
  }
  if (!overrides.empty()) plugins::apply_overrides(tree, overrides);
  return tree;
}

std::unique_ptr<nn::Decoder> build_job_model(const config::JobConfig& c, const models::ResolvedModel& model,
                                             const nn::ConfigTree& tree, const std::vector<nn::Recompute>& recompute,
                                             Precision param) {
  // LoRA: everything but the adapters is frozen, stored in the compute dtype (a bf16 base costs 2
  // bytes a weight and has no gradient or optimizer state).
  std::optional<nn::FrozenParameterScope> frozen;
  // QLoRA (lora.base_quantization): the base's linear weights stored quantized instead.
  std::optional<ops::QuantKind> quant;
  TITAN_CHECK(ops::parse_base_quantization(c.lora.base_quantization, quant), "[train] lora.base_quantization='",
              c.lora.base_quantization, "' passed validation (internal)");
  if (quant == ops::QuantKind::gguf && !ckpt::is_gguf_file(c.checkpoint.initial_load_path)) {
    config::config_fail("lora.base_quantization=gguf keeps a GGUF base's blocks, but checkpoint.initial_load_path='",
                        c.checkpoint.initial_load_path, "' is not a GGUF file; start from one (--model.hf_path "
                        "FILE.gguf) or use lora.base_quantization nf4 or int8");
  }
  if (c.lora.rank > 0) frozen.emplace(compute_dtype(param), quant);
  std::unique_ptr<nn::Decoder> whole = model.spec->build(model.config, tree);
  whole->check_shapes(c.training.local_batch_size, c.training.seq_len);
  if (c.validation.enable) {
    whole->check_shapes(c.validation.local_batch_size > 0 ? c.validation.local_batch_size : c.training.local_batch_size,
                        c.validation.seq_len > 0 ? c.validation.seq_len : c.training.seq_len);
  }
  whole->set_recompute(recompute);
  return whole;
}

// "model 'debug'", or "the model of DIR/config.json" (an empty model.name).
std::string model_label(const config::JobConfig& c) {
  return c.model.name.empty() ? "the model of " + c.model.hf_assets_path + "/config.json" : "model '" + c.model.name + "'";
}

plugins::LoraOptions lora_options(const config::JobConfig& config) {
  plugins::LoraOptions o;
  o.rank = config.lora.rank;
  o.alpha = config.lora.alpha;
  o.dropout = config.lora.dropout;
  o.target_modules.clear();
  std::string rest = config.lora.target_modules;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string item = rest.substr(0, comma);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) o.target_modules.push_back(item);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  return o;
}

PrecisionConfig resolve_precision(const config::JobConfig& c) {
  return {parse_precision(c.training.mixed_precision_param), parse_precision(c.training.mixed_precision_reduce)};
}

PipelineConfig resolve_pipeline(const config::ParallelismSection& ps, int64_t num_layers, int64_t local_batch) {
  PipelineConfig out;
  if (ps.pipeline_parallel_degree <= 1) return out;
  const int64_t rows = ps.pipeline_parallel_microbatch_size;
  if (rows < 1 || local_batch % rows != 0) {
    config::config_fail("parallelism.pipeline_parallel_microbatch_size=", rows, " does not divide "
                        "training.local_batch_size=", local_batch);
  }
  out.schedule = parallel::parse_pipeline_schedule(ps.pipeline_parallel_schedule);
  out.layout = models::decoder_pipeline_layout(num_layers, ps.pipeline_parallel_degree, out.schedule,
                                               ps.pipeline_parallel_layers_per_stage, ps.pipeline_parallel_split_points);
  out.micro_rows = rows;
  (void)parallel::pipeline_schedule(out.schedule, out.layout, 0, local_batch / rows);
  return out;
}

models::ParallelizeOptions parallelize_options(const config::JobConfig& c, const PrecisionConfig& precision,
                                               const PipelineConfig& pipeline, const models::ResolvedModel& model,
                                               const std::vector<nn::Recompute>& recompute) {
  models::ParallelizeOptions o{c.parallelism.enable_sequence_parallel, c.parallelism.fsdp_prefetch,
                               compute_dtype(precision.param), compute_dtype(precision.reduce), pipeline.layout,
                               pipeline.schedule, pipeline.micro_rows, nullptr};
  // A TP rank's share is built as the whole model was: the job's tree (LoRA adapters), a frozen
  // base, activation checkpointing.
  o.build_local = [c, model, recompute, param = precision.param](const nn::DecoderConfig& local) {
    models::ResolvedModel share = model;
    share.config = local;
    return build_job_model(c, share, job_tree(c, share), recompute, param);
  };
  return o;
}

AdamWConfig adamw_config(const config::JobConfig& c) {
  return {c.optimizer.beta1, c.optimizer.beta2, c.optimizer.eps, c.optimizer.weight_decay,
          c.optimizer.state_dtype == "bfloat16" ? DType::bf16 : DType::f32};
}

std::vector<std::pair<std::string, Shape>> muon_matrices(const std::string& spec,
                                                         const std::vector<std::pair<std::string, Shape>>& params) {
  std::vector<std::pair<std::string, Shape>> out;
  const auto stacked_experts = [](const std::string& fqn, const Shape& s) {
    return s.size() == 3 && fqn.find(".experts.") != std::string::npos;
  };
  if (spec == "auto") {
    for (const auto& [fqn, shape] : params) {
      if (fqn.starts_with("layers.") && (shape.size() == 2 || stacked_experts(fqn, shape))) out.emplace_back(fqn, shape);
    }
    return out;
  }
  std::vector<std::string> patterns;
  for (size_t begin = 0; begin <= spec.size();) {
    const size_t comma = std::min(spec.find(',', begin), spec.size());
    patterns.push_back(spec.substr(begin, comma - begin));
    begin = comma + 1;
  }
  std::vector<char> taken(params.size(), 0);
  for (const std::string& pattern : patterns) {
    bool any = false;
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& [fqn, shape] = params[i];
      if (pattern.empty() || !plugins::glob_match(pattern, fqn)) continue;
      any = true;
      const char* why = fqn.starts_with("tok_embeddings.") ? "the embedding"
                        : fqn.starts_with("output.")       ? "the head"
                        : shape.size() < 2                 ? "a vector (a norm weight or a bias)"
                        : shape.size() > 2 && !stacked_experts(fqn, shape) ? "not a matrix (a convolution's weight)"
                                                                          : nullptr;
      if (why != nullptr) {
        config::config_fail("optimizer.muon_params='", spec, "': Muon cannot take ", fqn, " ", shape_str(shape), ", ",
                            why, "; AdamW updates it. HINT: narrow the pattern '", pattern,
                            "' to the blocks' projection weights, or use auto");
      }
      taken[i] = 1;
    }
    if (!any) {
      config::config_fail("optimizer.muon_params='", spec, "': '", pattern, "' matches no trained parameter. HINT: "
                          "FQN globs such as layers.*.attention.w*.weight, or auto");
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (taken[i]) out.push_back(params[i]);
  }
  return out;
}

std::unique_ptr<Optimizer> make_optimizer(const config::JobConfig& c, models::Parallelized& model) {
  if (!config::uses_muon(c.optimizer)) return std::make_unique<AdamW>(model.shards(), adamw_config(c));
  MuonConfig muon;
  muon.momentum = c.optimizer.muon_momentum;
  muon.nesterov = c.optimizer.muon_nesterov;
  muon.newton_schulz.steps = c.optimizer.muon_ns_steps;
  muon.adjust_lr = parse_muon_lr_adjust(c.optimizer.muon_adjust_lr);
  muon.weight_decay = c.optimizer.weight_decay;
  std::vector<char> copies;
  for (size_t i = 0; i < model.shards().size(); ++i) copies.push_back(model.is_copy(i) ? 1 : 0);
  parallel::Comm* group = model.sharded() ? &model.mesh().replica() : nullptr;
  return std::make_unique<Muon>(model.shards(), model.placements(), std::move(copies),
                                muon_matrices(c.optimizer.muon_params, model.global_parameters()), group, muon,
                                adamw_config(c));
}

LrScheduleConfig lr_schedule_config(const config::JobConfig& c) {
  return {c.training.steps, c.lr_scheduler.warmup_steps, c.lr_scheduler.decay_ratio, c.lr_scheduler.decay_type,
          c.lr_scheduler.min_lr_factor};
}

MetricsOptions metrics_options(const config::JobConfig& c, const std::string& config_name) {
  return {c.job.dump_folder, c.metrics.log_freq, c.training.steps, c.metrics.enable_jsonl,
          c.metrics.enable_tensorboard, c.metrics.save_tb_folder, config_name};
}

}  // namespace titan::train
