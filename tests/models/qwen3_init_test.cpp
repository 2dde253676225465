// Parameter initialization: reproducible from the seed, and with the distribution torchtitan's
// Qwen3 uses (expected moments from the math of the (truncated) normal, not from our output).
#include <gtest/gtest.h>

#include <stdexcept>

#include <cmath>

#include "titan/models/decoder/weights.h"
#include "titan/models/qwen3/specs.h"

namespace titan::qwen3 {

using namespace titan::models;  // the shared decoder machinery the Qwen3 family is built on
namespace {

double sample_std(const Tensor& t) {
  const float* p = t.data<float>();
  double sum = 0.0, sum_sq = 0.0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    sum += p[i];
    sum_sq += static_cast<double>(p[i]) * p[i];
  }
  const double n = static_cast<double>(t.numel()), mean = sum / n;
  return std::sqrt(sum_sq / n - mean * mean);
}

TEST(Qwen3Init, ReproducibleFromTheSeed) {
  nn::DecoderConfig c = find_spec("debug").config;
  c.num_layers = 2;
  nn::Decoder a(c), b(c), other(c);
  init_weights(a, 7);
  init_weights(b, 7);
  init_weights(other, 8);
  const nn::ParameterList pa = a.parameters(), pb = b.parameters(), po = other.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(std::memcmp(pa[i]->value.raw_data(), pb[i]->value.raw_data(), pa[i]->value.nbytes()), 0) << pa[i]->fqn;
  }
  EXPECT_NE(std::memcmp(pa[2]->value.raw_data(), po[2]->value.raw_data(), pa[2]->value.nbytes()), 0);
}

// A parameter by FQN (whatever module holds it).
const Tensor& param(nn::Decoder& model, const std::string& fqn) {
  for (nn::Parameter* p : model.parameters()) {
    if (p->fqn == fqn) return p->value;
  }
  throw std::runtime_error("no parameter " + fqn);
}

TEST(Qwen3Init, StandardDeviationsFollowTorchtitan) {
  nn::DecoderConfig c = find_spec("debug").config;
  c.num_layers = 2;
  c.tie_embeddings = true;
  nn::Decoder model(c);
  init_weights(model, 0);
  // Relative standard error of a std estimate from n samples is ~1/sqrt(2n); n >= 65,536 here.
  const double tol = 0.01;
  EXPECT_NEAR(sample_std(param(model, "layers.0.attention.wq.weight")) / 0.02, 1.0, tol);
  EXPECT_NEAR(sample_std(param(model, "layers.1.feed_forward.w1.weight")) / 0.02, 1.0, tol);
  // Depth-scaled: 0.02 / sqrt(2 (layer + 1)).
  EXPECT_NEAR(sample_std(param(model, "layers.0.attention.wo.weight")) / (0.02 / std::sqrt(2.0)), 1.0, tol);
  EXPECT_NEAR(sample_std(param(model, "layers.1.feed_forward.w2.weight")) / (0.02 / std::sqrt(4.0)), 1.0, tol);
  // Tied table takes the head init: N(0, dim^-1/2) cut at 3 std, whose std is
  // sigma * sqrt(1 - 2*3*phi(3) / (2*Phi(3) - 1)) = 0.98658 sigma.
  const double sigma = 1.0 / std::sqrt(static_cast<double>(c.dim));
  const double phi3 = std::exp(-4.5) / std::sqrt(2.0 * M_PI), mass = std::erf(3.0 / std::sqrt(2.0));
  const double truncated = sigma * std::sqrt(1.0 - 6.0 * phi3 / mass);
  EXPECT_NEAR(sample_std(param(model, "tok_embeddings.weight")) / truncated, 1.0, tol);
  const float* emb = param(model, "tok_embeddings.weight").data<float>();
  for (int64_t i = 0; i < param(model, "tok_embeddings.weight").numel(); ++i) {
    ASSERT_LE(std::fabs(emb[i]), 3.0 * sigma + 1e-7);
  }
  EXPECT_EQ(param(model, "norm.weight").data<float>()[5], 1.0f);
  EXPECT_EQ(param(model, "layers.1.attention.q_norm.weight").data<float>()[3], 1.0f);
}

}  // namespace
}  // namespace titan::qwen3
