#include "titan/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "titan/core/error.h"
#include "titan/core/log.h"

namespace titan::train {

LrSchedule::LrSchedule(LrScheduleConfig cfg) : cfg_(std::move(cfg)) {
  TITAN_CHECK(cfg_.steps >= 1, "[lr_schedule] steps: expected >= 1, got ", cfg_.steps);
  TITAN_CHECK(cfg_.warmup_steps >= 0, "[lr_schedule] warmup_steps: expected >= 0, got ",
              cfg_.warmup_steps);
  TITAN_CHECK(cfg_.decay_ratio == -1.0 || (cfg_.decay_ratio >= 0.0 && cfg_.decay_ratio <= 1.0),
              "[lr_schedule] decay_ratio: expected a value in [0, 1] or -1 (decay over all steps "
              "after warmup), got ",
              cfg_.decay_ratio);
  TITAN_CHECK(cfg_.min_lr_factor >= 0.0 && cfg_.min_lr_factor <= 1.0,
              "[lr_schedule] min_lr_factor: expected a value in [0, 1], got ", cfg_.min_lr_factor);
  if (cfg_.decay_type == "linear") {
    type_ = DecayType::linear;
  } else if (cfg_.decay_type == "sqrt") {
    type_ = DecayType::sqrt;
  } else if (cfg_.decay_type == "cosine") {
    type_ = DecayType::cosine;
  } else {
    TITAN_FAIL("[lr_schedule] decay_type: expected linear, sqrt or cosine, got '", cfg_.decay_type,
               "'");
  }
  const int64_t n = cfg_.steps;
  warmup_ = cfg_.warmup_steps;
  if (warmup_ > n) {
    log_warn(str("[lr_schedule] warmup_steps (", warmup_, ") exceed steps (", n,
                 "); using warmup_steps = ", n));
    warmup_ = n;
  }
  if (cfg_.decay_ratio < 0.0) {
    decay_ = n - warmup_;
  } else {
    // Python's round(): half to even, which nearbyint gives in the default rounding mode.
    decay_ = static_cast<int64_t>(std::nearbyint(static_cast<double>(n) * cfg_.decay_ratio));
    if (warmup_ + decay_ > n) {
      log_warn(str("[lr_schedule] warmup (", warmup_, ") + decay (", decay_,
                   ") steps exceed steps (", n, "); using decay steps = ", n - warmup_));
      decay_ = n - warmup_;
    }
  }
  stable_ = n + 1 - warmup_ - decay_;  // torchtitan's virtual last step
}

double LrSchedule::factor(int64_t step) const {
  TITAN_CHECK(step >= 1, "[lr_schedule] step: expected a 1-based training step, got ", step);
  const int64_t c = step - 1;  // LambdaLR's last_epoch during training step `step`
  if (c < warmup_) return static_cast<double>(c + 1) / static_cast<double>(warmup_);
  if (c < warmup_ + stable_ || decay_ == 0) return 1.0;
  const double progress =
      static_cast<double>(c + 1 - (warmup_ + stable_)) / static_cast<double>(decay_);
  double adjustment = 0.0;
  switch (type_) {
    case DecayType::linear:
      adjustment = 1.0 - progress;
      break;
    case DecayType::sqrt:
      adjustment = 1.0 - std::sqrt(progress);
      break;
    case DecayType::cosine:
      adjustment = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
      break;
  }
  return cfg_.min_lr_factor + (1.0 - cfg_.min_lr_factor) * adjustment;
}

}  // namespace titan::train
