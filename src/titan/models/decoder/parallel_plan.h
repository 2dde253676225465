// The tensor-parallel plan of the decoder (Megatron style), by parameter FQN:
//   column-parallel (rows split, dim 0): attention.wq / wk / wv (weights and biases: whole heads),
//     feed_forward.w1 / w3, tok_embeddings and output (vocabulary-parallel)
//   row-parallel (columns split, dim 1): attention.wo, feed_forward.w2
//   replicated (-1): every RMSNorm weight (attention_norm, ffn_norm, q_norm, k_norm, norm)
// The gated DeltaNet (its heads split like attention's): in_proj_qkv and conv1d rows in three parts
// ([q | k | v], each rank some key heads of q and k and the value heads that read them), in_proj_z /
// in_proj_b / in_proj_a rows, A_log and dt_bias, by value head; out_proj row-parallel; its output
// norm (per head dim) replicated.
// A replicated parameter's gradient is a partial sum on each rank (so summed over the tp group)
// when its input is split: q_norm / k_norm and the DeltaNet's norm always (each rank holds some
// heads), the other norms under sequence parallelism (each rank holds some tokens).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/nn/decoder.h"

namespace titan::models {

// 0 or 1: the dimension split across tp ranks; -1: replicated. Throws for an FQN not in the plan
// (MoE experts and routers, row-parallel biases: not tensor-parallel yet).
int tp_split_dim(const std::string& fqn);
// The parts of the split dimension (empty: one): [q | k | v] of the DeltaNet's in_proj_qkv and conv1d.
std::vector<int64_t> tp_sections(const nn::DecoderConfig& full, const std::string& fqn);
// True when a replicated parameter's gradient must be summed over the tp group.
bool tp_grad_is_partial(const std::string& fqn, bool sequence_parallel);
// The decoder config one rank of `tp` builds: heads, kv heads, the DeltaNet's key and value heads,
// FFN width and vocabulary divided.
// Throws a one-line Error naming what does not divide (or what is not tensor-parallel yet).
nn::DecoderConfig tp_local_config(const nn::DecoderConfig& full, int64_t tp);

}  // namespace titan::models
