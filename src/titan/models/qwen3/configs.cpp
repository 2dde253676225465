// Qwen3 config functions. Each names only what differs from base_config(); the numbers of a run
// live in its function and nowhere else.
#include "titan/models/qwen3/configs.h"

#include "titan/config/registry.h"

namespace titan::qwen3 {

using config::base_config;

JobConfig qwen3_debug() {
  JobConfig c = base_config();
  c.job.dump_folder = "./outputs/qwen3_debug";
  c.model.name = "debug";
  c.model.hf_assets_path = "./outputs/quickstart_tokenizer";
  c.training.dataset = "quickstart";
  c.training.steps = 160;
  c.training.local_batch_size = 8;
  c.training.seq_len = 256;
  c.training.max_norm = 1.0;
  c.training.deterministic = true;
  c.optimizer.lr = 3e-3;
  c.optimizer.weight_decay = 0.1;
  c.lr_scheduler.warmup_steps = 16;
  c.lr_scheduler.decay_ratio = -1.0;
  c.lr_scheduler.decay_type = "cosine";
  c.lr_scheduler.min_lr_factor = 0.1;
  c.metrics.log_freq = 10;
  return c;
}

namespace {

// What the published sizes share: HF assets under ./assets/hf/Qwen3-<size>, 4096-token sequences,
// 10k steps with cosine decay to 10% of the peak lr. Larger models get a smaller batch per rank
// (memory), a lower peak lr and a longer warmup.
JobConfig qwen3_published(const char* size, const char* run_name, int64_t local_batch_size, double lr,
                          int64_t warmup_steps) {
  JobConfig c = base_config();
  c.job.dump_folder = std::string("./outputs/") + run_name;
  c.model.name = size;
  c.model.hf_assets_path = std::string("./assets/hf/Qwen3-") + size;
  c.training.steps = 10000;
  c.training.local_batch_size = local_batch_size;
  c.training.seq_len = 4096;
  c.training.max_norm = 1.0;
  c.optimizer.lr = lr;
  c.optimizer.weight_decay = 0.1;
  c.lr_scheduler.warmup_steps = warmup_steps;
  c.lr_scheduler.decay_ratio = -1.0;
  c.lr_scheduler.decay_type = "cosine";
  c.lr_scheduler.min_lr_factor = 0.1;
  return c;
}

}  // namespace

JobConfig qwen3_0_6b() { return qwen3_published("0.6B", "qwen3_0_6b", 4, 3e-4, 600); }
JobConfig qwen3_1_7b() { return qwen3_published("1.7B", "qwen3_1_7b", 4, 3e-4, 600); }
JobConfig qwen3_4b() { return qwen3_published("4B", "qwen3_4b", 2, 2e-4, 2000); }
JobConfig qwen3_8b() { return qwen3_published("8B", "qwen3_8b", 2, 2e-4, 2000); }
JobConfig qwen3_14b() { return qwen3_published("14B", "qwen3_14b", 1, 1.5e-4, 2000); }
JobConfig qwen3_32b() { return qwen3_published("32B", "qwen3_32b", 1, 1.5e-4, 2000); }

// The seed's third configuration: Qwen3-30B-A3B reduced to fit one machine, 4 layers of 64 experts
// with top-4 routing (the published attention, vocabulary and expert widths), trained from scratch.
// num_experts sets the experts in the model, not an expert-parallel degree.
JobConfig qwen3_30b_a3b_reduced() {
  JobConfig c = qwen3_published("30B-A3B", "qwen3_30b_a3b_reduced", 1, 3e-4, 600);
  c.model.n_layers = 4;
  c.model.num_experts = 64;
  c.model.top_k = 4;
  c.training.seq_len = 2048;
  return c;
}

// Fine-tuning, as the seed runs it: start from a Hugging Face folder (initial_load_in_hf, used
// only while the run has no checkpoint of its own), checkpoint along the way, and write an HF
// folder at the end (last_save_in_hf) that transformers loads as is. A low peak lr, a short
// warmup and cosine decay: the weights are already trained.
static JobConfig finetune(JobConfig c, const std::string& hf_folder) {
  c.checkpoint.enable = true;
  c.checkpoint.initial_load_path = hf_folder;
  c.checkpoint.initial_load_in_hf = true;
  c.checkpoint.initial_load_model_only = true;
  c.checkpoint.last_save_in_hf = true;
  c.checkpoint.last_save_model_only = true;
  c.optimizer.lr = 2e-5;
  c.optimizer.weight_decay = 0.01;
  c.lr_scheduler.decay_ratio = -1.0;
  c.lr_scheduler.decay_type = "cosine";
  c.lr_scheduler.min_lr_factor = 0.1;
  return c;
}

JobConfig qwen3_4b_finetune() {
  JobConfig c = finetune(qwen3_4b(), "./assets/hf/Qwen3-4B");  // weights and tokenizer in one folder
  c.job.dump_folder = "./outputs/qwen3_4b_finetune";
  c.training.steps = 1000;
  c.lr_scheduler.warmup_steps = 50;
  c.checkpoint.interval = 250;
  c.checkpoint.keep_latest_k = 2;
  c.checkpoint.export_dtype = "bfloat16";  // as Qwen/Qwen3-4B is published
  return c;
}

// The seed's 4B fine-tune as LoRA, what fits a 24 GiB CPU server (a full fine-tune needs 64 GB):
// rank 16 on every projection (alpha 32), the base frozen in bf16 (8 GB, no gradient or optimizer
// state), activation checkpointing, batch 1 x 2048 tokens, a LoRA-sized lr, on chat conversations
// (./assets/data/chat.jsonl, rendered by the model folder's chat template, loss on the assistant's
// tokens). Checkpoints hold the adapters; the end writes the merged model (bf16 HF folder) and the
// PEFT adapter.
JobConfig qwen3_4b_lora() {
  JobConfig c = qwen3_4b_finetune();
  c.job.dump_folder = "./outputs/qwen3_4b_lora";
  c.lora.rank = 16;
  c.lora.alpha = 32.0;
  c.lora.target_modules = "all-linear";
  c.lora.save_adapter = "adapter";
  c.training.mixed_precision_param = "bfloat16";
  c.training.dataset_format = "chat";
  c.training.dataset_path = "./assets/data/chat.jsonl";
  c.activation_checkpoint.mode = "full";
  c.training.local_batch_size = 1;
  c.training.seq_len = 2048;
  c.optimizer.lr = 2e-4;
  c.optimizer.weight_decay = 0.0;
  return c;
}

// The test twin of qwen3_4b_finetune: the same flow (HF import, checkpoints, HF export) on a tiny
// HF folder ./assets/hf/tiny-qwen3 holding config.json, model.safetensors and a tokenizer. The
// model is built from that config.json (model.name empty), as for any HF folder; the tests make
// the folder from a tools/make_hf_fixtures.py fixture plus a tokenizer from `titan train-tokenizer`.
JobConfig qwen3_debug_finetune() {
  JobConfig c = finetune(qwen3_debug(), "./assets/hf/tiny-qwen3");
  c.model.name = "";
  c.model.hf_assets_path = "./assets/hf/tiny-qwen3";
  c.job.dump_folder = "./outputs/qwen3_debug_finetune";
  c.training.steps = 20;
  c.training.local_batch_size = 4;
  c.training.seq_len = 64;
  c.lr_scheduler.warmup_steps = 2;
  c.optimizer.lr = 1e-3;  // a random tiny model: a larger step shows the loss move
  c.checkpoint.interval = 10;
  c.metrics.log_freq = 5;
  return c;
}

std::vector<config::ConfigEntry> config_functions() {
  return {
      {"qwen3_debug", "quickstart: the debug model (4 layers, dim 256) on the built-in dataset, 160 steps",
       &qwen3_debug},
      {"qwen3_0_6b", "Qwen3-0.6B, seq_len 4096, assets in ./assets/hf/Qwen3-0.6B", &qwen3_0_6b},
      {"qwen3_1_7b", "Qwen3-1.7B, seq_len 4096, assets in ./assets/hf/Qwen3-1.7B", &qwen3_1_7b},
      {"qwen3_4b", "Qwen3-4B, seq_len 4096, assets in ./assets/hf/Qwen3-4B", &qwen3_4b},
      {"qwen3_8b", "Qwen3-8B, seq_len 4096, assets in ./assets/hf/Qwen3-8B", &qwen3_8b},
      {"qwen3_14b", "Qwen3-14B, seq_len 4096, assets in ./assets/hf/Qwen3-14B", &qwen3_14b},
      {"qwen3_32b", "Qwen3-32B, seq_len 4096, assets in ./assets/hf/Qwen3-32B", &qwen3_32b},
      {"qwen3_30b_a3b_reduced",
       "Qwen3-30B-A3B reduced to 4 layers, 64 experts, top-4 (the seed's MoE run), assets in ./assets/hf/Qwen3-30B-A3B",
       &qwen3_30b_a3b_reduced},
      {"qwen3_4b_finetune",
       "fine-tune Qwen3-4B: import ./assets/hf/Qwen3-4B (HF), lr 2e-5, 1000 steps, checkpoints, bf16 HF export",
       &qwen3_4b_finetune},
      {"qwen3_4b_lora",
       "LoRA fine-tune of Qwen3-4B (r 16, all linear, bf16 base, activation checkpointing, T 2048): "
       "./assets/hf/Qwen3-4B",
       &qwen3_4b_lora},
      {"qwen3_debug_finetune",
       "test twin of qwen3_4b_finetune: the tiny HF folder ./assets/hf/tiny-qwen3 imported, 20 steps",
       &qwen3_debug_finetune},
  };
}

}  // namespace titan::qwen3
