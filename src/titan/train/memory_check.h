// The memory check before anything is allocated: the least memory one rank of a job needs against
// what this machine has available, so that an impossible size (a million layers, the 32B model on
// 24 GiB, a vocabulary of 1e12, a batch of 1e8 rows) is a one-line config error naming the field
// that is too large, instead of minutes of work ended by the OOM killer.
//
// The floor counts what a rank cannot do without:
//   states       the parameters a rank holds with their gradients and AdamW moments (4 + 4 + 8
//                bytes per element of its FSDP/TP share), or a frozen LoRA base in its compute
//                dtype (whole on every rank; the adapters are left out)
//   activations  85% of what the planner predicts the modules save for backward (the planner is
//                within 15% of measured), with activation checkpointing as configured; none
//                under a pipeline (its schedule decides them)
// Nothing else (gathered FSDP units, the head's logits, backward temporaries, the allocator's
// slack) is counted, so a job under the floor may still not fit; one over it never does.
// A job whose floor exceeds the memory available to the rank cannot run, whatever else it holds.
#pragma once

#include <string>
#include <vector>

#include "titan/nn/decoder.h"

namespace titan::train {

struct MemoryFloorInput {
  nn::DecoderConfig model;
  int64_t dp_shard = 1, tp = 1;
  int64_t ep = 1;  // expert parallelism: E / ep experts whole on each rank, outside FSDP
  int64_t pp = 1;  // pipeline stages: a rank holds about 1 / pp of the layers and their activations
  int64_t world = 1;
  int64_t local_batch = 1, seq_len = 1;
  std::vector<nn::Recompute> recompute;  // per layer; empty = keep_all
  bool bf16 = false;                     // compute dtype bf16 (a frozen base takes 2 bytes)
  bool frozen_base = false;              // LoRA: no gradients or optimizer state for the base
};

struct MemoryFloor {
  double states = 0, activations = 0;
  double embedding_states = 0, expert_states = 0;  // parts of `states`, for the hint
  bool frozen = false;                             // states are a frozen base's weights only
  double total() const { return states + activations; }
};

MemoryFloor memory_floor(const MemoryFloorInput& in);

// Bytes this process may still use: /proc/meminfo's MemAvailable, or less where a cgroup limit
// says so, shared by the ranks on this node (parallel::launch_info().local_world).
double available_memory_per_rank();

// Throws config::ConfigError when `floor` exceeds `available`: the figures, and a hint naming
// the field to lower (the batch when the states alone fit, else the experts, the vocabulary or
// the layers, whichever holds the most).
void check_memory_floor(const MemoryFloor& floor, double available, const std::string& model_label);

}  // namespace titan::train
