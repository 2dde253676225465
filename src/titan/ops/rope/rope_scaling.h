// RoPE frequency scaling as Hugging Face Transformers computes it (modeling_rope_utils.py,
// ROPE_INIT_FUNCTIONS and the dynamic_rope_update decorator). With K2 = head_dim / 2 and
// base[i] = 1 / theta^(2i / head_dim), each type gives inv_freq[K2] and an attention factor
// that multiplies cos and sin (HF: cos = emb.cos() * attention_scaling):
//   default   base; factor 1
//   linear    base / factor
//   dynamic   NTK: theta' = theta * (factor * L / M - (factor - 1))^(K / (K - 2)), L = max(seq_len, M),
//             M = max_position_embeddings; a function of the forward's length
//   yarn      blend of base (extrapolation) and base / factor (interpolation) by a linear ramp over
//             the correction range [low, high] found from beta_fast / beta_slow and
//             original_max_position_embeddings (floor/ceil'd when truncate); attention factor from
//             attention_factor, else mscale / mscale_all_dim, else 0.1 ln(factor) + 1
//   llama3    base / factor below low-frequency wavelengths, base above high-frequency ones, a
//             smooth blend between (low_freq_factor, high_freq_factor, original_max_position_embeddings)
//   longrope  base / ext[i], ext = long_factor when seq_len > original_max_position_embeddings, else
//             short_factor; attention factor from attention_factor, else
//             sqrt(1 + ln(factor) / ln(original_max_position_embeddings)) (1 when factor <= 1); factor
//             is the given one, else M / original
// `seq_len` is the forward's length, max(position) + 1 (HF's dynamic_rope_update takes the same
// value from position_ids; HF's module also remembers the longest length it has seen, which only
// matters when a shorter sequence follows a longer one past M; titan's tables depend on this
// forward's positions alone).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan::ops {

enum class RopeType { default_, linear, dynamic, yarn, llama3, longrope };

struct RopeScaling {
  RopeType type = RopeType::default_;
  double factor = 1.0;                          // every type but default (longrope: see above)
  int64_t max_position_embeddings = 0;          // the config's (dynamic, yarn/longrope defaults)
  // yarn, llama3, longrope; a double as in Transformers, which computes with 20.5 as given
  double original_max_position_embeddings = 0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  double beta_fast = 32.0, beta_slow = 1.0;     // yarn
  double attention_factor = 0.0;                // yarn, longrope: 0 = derive as HF does
  double mscale = 0.0, mscale_all_dim = 0.0;    // yarn (DeepSeek): 0 = unset
  bool truncate = true;                         // yarn
  std::vector<double> long_factor, short_factor;  // longrope, head_dim / 2 each
  // The config.json block this was read from ("rope_parameters" or "rope_scaling", and its JSON
  // text), written back unchanged on export; empty when the config named no scaling.
  std::string hf_key, hf_json;

  bool operator==(const RopeScaling&) const = default;
};

struct RopeFrequencies {
  std::vector<double> inv_freq;  // [head_dim / 2]
  double attention_factor = 1.0;
};

const char* rope_type_name(RopeType type);

// Throws a one-line error when the parameters cannot give finite frequencies (factor <= 0, a
// longrope list of the wrong length, ...).
void check_rope_scaling(const RopeScaling& s, int64_t head_dim);

RopeFrequencies rope_frequencies(double theta, int64_t head_dim, const RopeScaling& s, int64_t seq_len);

}  // namespace titan::ops
