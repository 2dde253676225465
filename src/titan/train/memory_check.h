// The memory check before anything is allocated: the least memory one rank of a job needs against
// what this machine has available, so that an impossible size (a million layers, the 32B model on
// 24 GiB, a vocabulary of 1e12, a batch of 1e8 rows) is a one-line config error naming the field
// that is too large, instead of minutes of work ended by the OOM killer.
//
// The floor counts what a rank cannot do without:
//   states       the parameters a rank holds with their gradients and AdamW moments (4 + 4 + 8
//                bytes per element of its FSDP/TP share; 4 + 4 + 4 with bf16 moments), or a frozen
//                LoRA base in its compute dtype (whole on every rank; the blocks' linear weights
//                at their quantized size under lora.base_quantization) plus its adapters with their
//                gradients and moments (16 bytes per element of the share, 12 with bf16 moments)
//   activations  what the step adds at its peak on this rank, measured on the meta device
//                (train/meta_plan.h: the job's model, parallelize and step with no values, so
//                activation checkpointing, the pipeline schedule, gathered FSDP units, the head's
//                logits and any plugin module count as they will)
// Memory outside the allocator (libraries, kernel scratch, the allocator's slack) is not counted,
// so a job under the floor may still not fit; one over it does not.
// A job whose floor exceeds the memory available to the rank cannot run, whatever else it holds.
// Inference (titan forward / generate) has a floor too: the weights as loaded (f32, adapters
// included), the KV cache and the logits; no gradients, no optimizer.
// The states run on closed forms, never a per-layer loop or vector: a config.json with 1e9
// layers is refused in microseconds, before the meta run that walks every layer.
#pragma once

#include <string>
#include <vector>

#include "titan/nn/config_tree.h"
#include "titan/nn/decoder.h"

namespace titan::train {

struct MemoryFloorInput {
  nn::DecoderConfig model;
  int64_t dp_shard = 1, tp = 1;
  int64_t ep = 1;  // expert parallelism: E / ep experts whole on each rank, outside FSDP
  int64_t pp = 1;  // pipeline stages: a rank holds about 1 / pp of the layers and their activations
  int64_t world = 1;
  bool bf16 = false;                     // compute dtype bf16 (a frozen base takes 2 bytes)
  bool frozen_base = false;              // LoRA: no gradients or optimizer state for the base
  bool bf16_moments = false;             // optimizer.state_dtype bfloat16: 2 + 2 bytes of moments
  double adapter_elements = 0;           // LoRA adapters (trained: 16 bytes each); lora_adapter_elements
  // lora.base_quantization: bytes per weight of the frozen blocks' linear weights (nf4 0.5625 with
  // its absmax, int8 ~1); 0: stored in the compute dtype like the rest of the base.
  double quantized_bytes_per_weight = 0;
  double measured_peak = 0;              // the meta run's step peak (MetaPlan::peak); 0 = not measured
};

struct MemoryFloor {
  double states = 0, activations = 0;
  double embedding_states = 0, expert_states = 0;  // parts of `states`, for the hint
  double adapter_states = 0;                       // part of `states`: LoRA adapters trained
  bool frozen = false;                             // states are a frozen base's weights (+ adapters)
  bool inference = false;                          // states are the weights of titan forward / generate
  double total() const { return states + activations; }
};

// The states, and as activations what the measured peak holds beyond them.
MemoryFloor memory_floor(const MemoryFloorInput& in);
// The states alone (activations 0): closed forms, safe before anything per layer exists.
MemoryFloor memory_floor_states(const MemoryFloorInput& in);

// rank x (in + out) summed over the LoraLinear nodes of a config tree (after the LoRA override).
double lora_adapter_elements(const nn::ConfigTree& tree);

// Inference: every weight in f32 (and `adapter_elements` more), a KV cache of `rows` x
// `cache_positions` (K and V, f32, every layer) and logits of `rows` x `logit_positions` x vocab.
MemoryFloor inference_memory_floor(const nn::DecoderConfig& model, double adapter_elements, int64_t rows,
                                   int64_t cache_positions, int64_t logit_positions);

// Bytes this process may still use: /proc/meminfo's MemAvailable, or less where a cgroup limit
// says so, shared by the ranks on this node (parallel::launch_info().local_world).
double available_memory_per_rank();

// What the hint calls the fields to lower: a named spec's CLI fields, or config.json's.
struct FloorFields {
  std::string layers = "model.n_layers or pick a smaller model.name";
  std::string vocab = "vocab_size (model.name, or config.json's vocab_size)";
  std::string batch = "training.local_batch_size or training.seq_len, or set activation_checkpoint.mode full";
  std::string adapter_rank = "lora.rank";
};

// Throws config::ConfigError when `floor` exceeds `available`: the figures, and a hint naming
// the field to lower (the batch when the states alone fit, else the adapters' rank, the experts,
// the vocabulary or the layers, whichever holds the most).
void check_memory_floor(const MemoryFloor& floor, double available, const std::string& model_label,
                        const FloorFields& fields = {});

}  // namespace titan::train
