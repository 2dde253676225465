// Autoregressive generation over a Decoder with a KV cache, as Hugging Face generate() runs it:
// prefill the prompt, then one token per step; each step picks every unfinished row's next token
// (greedy, or sampled), a finished row gets pad_id; a row finishes when it emits one of eos_ids;
// generation ends when every row finished or after max_new_tokens steps.
// Legend: B rows, T prompt slots (rows of different lengths are left-padded; row b's prompt
// starts at slot begin_B[b]), V vocabulary, L = T + steps.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "titan/core/tensor.h"
#include "titan/nn/decoder.h"

namespace titan::nn {

struct SamplingConfig {
  float temperature = 1.0f;  // 0: greedy (argmax, the first of equal maxima as torch.argmax)
  int64_t top_k = 0;         // keep the k most likely tokens; 0: all
  float top_p = 1.0f;        // keep the smallest most-likely set with probability mass >= top_p
  uint64_t seed = 0;         // Rng(seed).uniform(step * B + row) draws the token
};

// The token picked from logits_V with the uniform draw u in [0, 1): argmax when temperature is 0,
// or so small that the most likely logit / temperature overflows float (the T -> 0 limit);
// otherwise HF's warpers in their order (temperature, top-k, top-p) and then the token at which
// the kept probabilities' cumulative sum (most likely first) reaches u. `scratch` is reused.
int64_t pick_token(const float* logits_V, int64_t V, const SamplingConfig& sampling, float u,
                   std::vector<std::pair<float, int64_t>>& scratch);

struct GenerateOptions {
  int64_t max_new_tokens = 0;    // > 0
  std::vector<int64_t> eos_ids;  // may be empty: then every row runs max_new_tokens
  int64_t pad_id = 0;            // what a finished row gets
  SamplingConfig sampling;
};

// ids_BT: i64 [B, T] (left padding before begin_B[b] is never attended); returns i64 [B, T + steps].
// on_step(step, token_B, unfinished_B) after each step (streaming); unfinished_B is the state
// before the step's tokens are checked against eos_ids.
Tensor generate(Decoder& model, const Tensor& ids_BT, const std::vector<int64_t>& begin_B,
                const GenerateOptions& options,
                const std::function<void(int64_t step, const std::vector<int64_t>& token_B,
                                         const std::vector<bool>& unfinished_B)>& on_step = {});

}  // namespace titan::nn
