#include "titan/nn/generate.h"

#include <algorithm>
#include <cmath>

#include "titan/core/rng.h"

namespace titan::nn {

int64_t pick_token(const float* logits_V, int64_t V, const SamplingConfig& sampling, float u,
                   std::vector<std::pair<float, int64_t>>& scratch) {
  if (sampling.temperature == 0.0f) return std::max_element(logits_V, logits_V + V) - logits_V;
  // (logit / T, id), most likely first; ties keep the lower id first (a stable order).
  scratch.resize(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i) scratch[static_cast<size_t>(i)] = {logits_V[i] / sampling.temperature, i};
  auto more_likely = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t kept = scratch.size();
  if (sampling.top_k > 0 && static_cast<size_t>(sampling.top_k) < kept) {
    kept = static_cast<size_t>(sampling.top_k);
    std::partial_sort(scratch.begin(), scratch.begin() + static_cast<int64_t>(kept), scratch.end(), more_likely);
  } else {
    std::sort(scratch.begin(), scratch.end(), more_likely);
  }
  // A temperature so small that logit / T overflows float (1e-45, a denormal) leaves +-inf, and
  // softmax(inf - inf) is NaN. The limit of softmax(x / T) as T -> 0 is the argmax: greedy (what
  // HF's float division amounts to where it does not fail outright).
  if (!std::isfinite(scratch.front().first)) return std::max_element(logits_V, logits_V + V) - logits_V;
  // Softmax over the kept logits (in double), then top-p: a token stays while the mass before it
  // is below top_p (the most likely one always stays), as HF's TopPLogitsWarper keeps it.
  const double max = scratch.front().first;
  std::vector<double> p(kept);
  double sum = 0.0;
  for (size_t i = 0; i < kept; ++i) sum += p[i] = std::exp(static_cast<double>(scratch[i].first) - max);
  if (sampling.top_p < 1.0f) {
    double before = 0.0;
    size_t n = 0;
    while (n < kept && (n == 0 || before < static_cast<double>(sampling.top_p))) before += p[n++] / sum;
    kept = n;
    sum = 0.0;
    for (size_t i = 0; i < kept; ++i) sum += p[i];
  }
  const double target = static_cast<double>(u) * sum;
  double cumulative = 0.0;
  for (size_t i = 0; i < kept; ++i) {
    cumulative += p[i];
    if (cumulative > target) return scratch[i].second;
  }
  return scratch[kept - 1].second;
}

Tensor generate(Decoder& model, const Tensor& ids_BT, const std::vector<int64_t>& begin_B,
                const GenerateOptions& options,
                const std::function<void(int64_t, const std::vector<int64_t>&, const std::vector<bool>&)>& on_step) {
  const int64_t B = ids_BT.size(0), T = ids_BT.size(1), V = model.config().vocab_size, N = options.max_new_tokens;
  TITAN_CHECK(N > 0, "[generate] max_new_tokens = ", N, "; expected at least 1");
  KvCache cache = model.make_kv_cache(begin_B, T + N);
  std::vector<int64_t> out(static_cast<size_t>(B * (T + N)));
  for (int64_t b = 0; b < B; ++b) std::copy_n(ids_BT.data<int64_t>() + b * T, T, out.begin() + b * (T + N));
  const Rng rng(options.sampling.seed);
  std::vector<std::pair<float, int64_t>> scratch;
  std::vector<bool> unfinished(static_cast<size_t>(B), true);
  std::vector<int64_t> token_B(static_cast<size_t>(B));
  Tensor next_B1 = Tensor::empty({B, 1}, DType::i64);
  Tensor logits_B1V = model.forward_cached(ids_BT, cache, /*last_only=*/true);
  int64_t steps = 0;
  while (true) {
    for (int64_t b = 0; b < B; ++b) {
      const float u = rng.uniform(static_cast<uint64_t>(steps * B + b));
      const int64_t picked = pick_token(logits_B1V.data<float>() + b * V, V, options.sampling, u, scratch);
      token_B[static_cast<size_t>(b)] = unfinished[static_cast<size_t>(b)] ? picked : options.pad_id;
      out[static_cast<size_t>(b * (T + N) + T + steps)] = token_B[static_cast<size_t>(b)];
      next_B1.data<int64_t>()[b] = token_B[static_cast<size_t>(b)];
    }
    if (on_step) on_step(steps, token_B, unfinished);
    ++steps;
    bool any = false;
    for (int64_t b = 0; b < B; ++b) {
      const auto& eos = options.eos_ids;
      if (std::find(eos.begin(), eos.end(), token_B[static_cast<size_t>(b)]) != eos.end()) unfinished[static_cast<size_t>(b)] = false;
      any = any || unfinished[static_cast<size_t>(b)];
    }
    if (!any || steps == N) break;
    logits_B1V = model.forward_cached(next_B1, cache, true);
  }
  Tensor ids_BL = Tensor::empty({B, T + steps}, DType::i64);
  for (int64_t b = 0; b < B; ++b) {
    std::copy_n(out.begin() + b * (T + N), T + steps, ids_BL.data<int64_t>() + b * (T + steps));
  }
  return ids_BL;
}

}  // namespace titan::nn
