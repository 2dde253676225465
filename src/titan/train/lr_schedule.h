// Learning-rate schedule: torchtitan's linear warmup + stable + decay
// (torchtitan/components/optimizer/lr_scheduler.py, LRSchedulersContainer.Config.build and
// linear_warmup_stable_decay, torchtitan 0.3.0 on PyPI), as a factor on the base lr.
//
// Setup (N = steps, W = warmup_steps, r = decay_ratio):
//   W  = min(W, N)
//   D  = r < 0 (torchtitan: None) ? N - W : min(round_half_even(N * r), N - W)
//   S  = N + 1 - W - D        (the +1 is torchtitan's "virtual last step", so the last real step
//                              does not get lr 0)
// torchtitan drives a LambdaLR: training step s (1-based) runs with lambda(c), c = s - 1
// (LambdaLR evaluates lambda(0) at construction and steps once after each optimizer step).
// With c = s - 1:
//   c < W        : factor = (c + 1) / W                                     (warmup)
//   c < W + S    : factor = 1                                               (stable)
//   otherwise    : progress = (c + 1 - (W + S)) / D
//                  linear: 1 - progress; sqrt: 1 - sqrt(progress); cosine: (1 + cos(pi*progress))/2
//                  factor = min_lr_factor + (1 - min_lr_factor) * that
// So warmup reaches 1 at step W, and the last step N gets min_lr_factor + (1-min_lr_factor) *
// decay(D / (D + 1)) -- e.g. linear: min_lr_factor + (1 - min_lr_factor) / (D + 1) -- never 0.
// Steps past N continue the same formula (torchtitan does too); there the linear factor goes
// below min_lr_factor. With D == 0 the stable phase continues (torchtitan asserts there).
#pragma once

#include <cstdint>
#include <string>

namespace titan::train {

struct LrScheduleConfig {
  int64_t steps = 1;          // training steps N (>= 1)
  int64_t warmup_steps = 0;   // >= 0; clamped to steps, as torchtitan does
  double decay_ratio = -1.0;  // in [0, 1], or -1 for torchtitan's None (decay all after warmup)
  std::string decay_type = "linear";  // linear | sqrt | cosine
  double min_lr_factor = 0.0;         // in [0, 1]
};

class LrSchedule {
 public:
  // Throws titan::Error (one line, naming the field) on an invalid config.
  explicit LrSchedule(LrScheduleConfig cfg);

  // lr used at training step `step` (1-based) = base_lr * factor(step). Throws for step < 1.
  double factor(int64_t step) const;

  int64_t warmup_steps() const { return warmup_; }
  int64_t stable_steps() const { return stable_; }
  int64_t decay_steps() const { return decay_; }

 private:
  enum class DecayType { linear, sqrt, cosine };
  LrScheduleConfig cfg_;
  DecayType type_ = DecayType::linear;
  int64_t warmup_ = 0;
  int64_t stable_ = 0;
  int64_t decay_ = 0;
};

}  // namespace titan::train
