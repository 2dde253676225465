#include "titan/nn/loss_terms.h"

#include "titan/core/error.h"

namespace titan::nn {

double LossResult::sum(std::string_view name) const {
  for (const LossTerm& t : terms) {
    if (t.name == name) return t.sum;
  }
  return 0.0;
}

void LossResult::add(const LossResult& other) {
  num_targets += other.num_targets;
  if (other.terms.empty()) return;
  TITAN_CHECK(other.terms.size() == terms.size(), "[model] adding ", other.terms.size(), " loss terms to ",
              terms.size(), " (internal: start from the model's loss_terms())");
  for (size_t i = 0; i < terms.size(); ++i) terms[i].sum += other.terms[i].sum;
}

// 0.0 + 1.0 * x is x and w * (s / 1.0) is w * s, so a decoder's loss is bit for bit
// ce / targets + coef * aux, as it was computed before terms.
double LossResult::mean(int64_t forwards) const {
  double total = 0.0;
  for (const LossTerm& t : terms) {
    if (t.denominator == LossDenominator::targets) {
      if (num_targets > 0) total += t.weight * (t.sum / static_cast<double>(num_targets));
    } else {
      total += t.weight * (t.sum / static_cast<double>(forwards));
    }
  }
  return total;
}

}  // namespace titan::nn
