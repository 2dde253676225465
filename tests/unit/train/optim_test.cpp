// AdamW, gradient clipping and the lr schedule against PyTorch / torchtitan fixtures
// (tests/fixtures/optim/, made by tools/make_optim_fixtures.py), plus restore, determinism and
// error cases.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "ops/op_harness.h"
#include "titan/core/parallel.h"
#include "titan/ops/registry.h"
#include "titan/train/clip.h"
#include "titan/train/lr_schedule.h"
#include "titan/train/optimizer.h"

namespace titan::train {
namespace {

using namespace titan::testing;
using nlohmann::json;

json load_fixture(const std::string& name) {
  const std::string path = source_path("tests/fixtures/optim/" + name);
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("missing fixture " + path +
                             ". HINT: python3 tools/make_optim_fixtures.py");
  return json::parse(in);
}

Shape shape_of(const json& j) { return j.get<std::vector<int64_t>>(); }

// Owns the parameters a ParameterList points to.
struct Params {
  std::vector<std::unique_ptr<nn::Parameter>> owned;
  nn::ParameterList list;

  void add(const std::string& fqn, const Shape& shape, const std::vector<double>& value) {
    owned.push_back(std::make_unique<nn::Parameter>());
    owned.back()->init(fqn, shape, Device::cpu);
    if (!value.empty()) owned.back()->value.copy_from(from_doubles(value, shape));
    list.push_back(owned.back().get());
  }
};

void set_grad(nn::Parameter& p, const std::vector<double>& g) {
  p.grad.copy_from(from_doubles(g, p.value.shape()));
}

// f32 results of the same op sequence in a different order / precision (ours: f32 moments as
// torch, scalars from double): a few ulp of each value, param moves ~lr per step.
constexpr Tolerance kParamTol{1e-6, 1e-5};
constexpr Tolerance kMomentTol{1e-9, 1e-5};

void run_adamw_case(const json& c, const std::string& label) {
  Params ps;
  for (const json& p : c["params"]) {
    ps.add(p["fqn"], shape_of(p["shape"]), p["value"].get<std::vector<double>>());
  }
  AdamW opt(ps.list, AdamWConfig{c["beta1"], c["beta2"], c["eps"], c["weight_decay"]});
  int64_t step = 0;
  for (const json& s : c["steps"]) {
    ++step;
    for (size_t i = 0; i < ps.list.size(); ++i) set_grad(*ps.list[i], s["grads"][i]);
    opt.step(s["lr"].get<double>());
    ASSERT_EQ(opt.step_count(), step);
    for (size_t i = 0; i < ps.list.size(); ++i) {
      const json& want = s["after"][i];
      const std::string at = label + " " + c["name"].get<std::string>() +
                             " step=" + std::to_string(step) + " " + ps.list[i]->fqn;
      EXPECT_TRUE(
          all_close(at + " param", to_doubles(ps.list[i]->value), want["param"], kParamTol));
      EXPECT_TRUE(
          all_close(at + " exp_avg", to_doubles(opt.exp_avg(i)), want["exp_avg"], kMomentTol));
      EXPECT_TRUE(all_close(at + " exp_avg_sq", to_doubles(opt.exp_avg_sq(i)), want["exp_avg_sq"],
                            kMomentTol));
    }
  }
}

TEST(AdamWOptimizer, MatchesTorchAdamW) {
  const json fx = load_fixture("adamw.json");
  ASSERT_GE(fx["cases"].size(), 2u);
  for (const json& c : fx["cases"]) run_adamw_case(c, "adamw_cpu");
}

TEST(AdamWOptimizer, ReferenceMatchesTorchAdamW) {
  ops::set_use_ref(true);
  const json fx = load_fixture("adamw.json");
  for (const json& c : fx["cases"]) run_adamw_case(c, "adamw_ref");
  ops::set_use_ref(false);
}

// A run restored from (step count, moments, params) after 3 steps continues bit-identically.
TEST(AdamWOptimizer, RestoreContinuesIdentically) {
  const json c = load_fixture("adamw.json")["cases"][0];
  Params a, b;
  for (const json& p : c["params"]) {
    a.add(p["fqn"], shape_of(p["shape"]), p["value"].get<std::vector<double>>());
    b.add(p["fqn"], shape_of(p["shape"]), {});
  }
  const AdamWConfig cfg{c["beta1"], c["beta2"], c["eps"], c["weight_decay"]};
  AdamW opt_a(a.list, cfg);
  auto run = [&](AdamW& opt, Params& ps, size_t first, size_t last) {
    for (size_t s = first; s < last; ++s) {
      for (size_t i = 0; i < ps.list.size(); ++i) set_grad(*ps.list[i], c["steps"][s]["grads"][i]);
      opt.step(c["steps"][s]["lr"].get<double>());
    }
  };
  run(opt_a, a, 0, 3);
  std::vector<Tensor> m, v;
  for (size_t i = 0; i < a.list.size(); ++i) {
    b.list[i]->value.copy_from(a.list[i]->value);
    m.push_back(opt_a.exp_avg(i).clone());
    v.push_back(opt_a.exp_avg_sq(i).clone());
  }
  AdamW opt_b(b.list, cfg);
  opt_b.restore(opt_a.step_count(), m, v);
  EXPECT_EQ(opt_b.step_count(), 3);
  run(opt_a, a, 3, 5);
  run(opt_b, b, 3, 5);
  for (size_t i = 0; i < a.list.size(); ++i) {
    EXPECT_EQ(to_doubles(a.list[i]->value), to_doubles(b.list[i]->value)) << a.list[i]->fqn;
    EXPECT_EQ(to_doubles(opt_a.exp_avg_sq(i)), to_doubles(opt_b.exp_avg_sq(i))) << a.list[i]->fqn;
  }
  // A mismatched restore names the parameter and changes nothing.
  std::vector<Tensor> bad = m;
  bad[1] = Tensor::zeros({3});
  EXPECT_NE(error_of([&] {
              opt_b.restore(7, bad, v);
            }).find("[adamw] restore b.bias exp_avg: expected shape [17]"),
            std::string::npos);
  EXPECT_EQ(opt_b.step_count(), 5);
  EXPECT_NE(error_of([&] { opt_b.restore(7, {}, {}); }).find("expected 5 exp_avg"),
            std::string::npos);
}

TEST(AdamWOptimizer, RejectsBadConfig) {
  Params ps;
  ps.add("w", {4}, {});
  EXPECT_NE(error_of([&] {
              AdamW(ps.list, AdamWConfig{0.9, 1.0, 1e-8, 0.1});
            }).find("[adamw] betas"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------

Params clip_params(const json& c) {
  Params ps;
  for (size_t i = 0; i < c["shapes"].size(); ++i) {
    ps.add(str("p", i), shape_of(c["shapes"][i]),
           {});  // str(): GCC 12 -Wrestrict false positive on "p" + s
    set_grad(*ps.list[i], c["grads"][i]);
  }
  return ps;
}

TEST(ClipGradNorm, MatchesTorch) {
  const json fx = load_fixture("clip.json");
  ASSERT_GE(fx["cases"].size(), 2u);
  for (const json& c : fx["cases"]) {
    const std::string name = c["name"];
    Params ps = clip_params(c);
    const double want = c["norm"];
    // torch forms the norm in f32; ours in fp64.
    EXPECT_NEAR(grad_norm(ps.list), want, 2e-6 * want) << name;
    const double norm = clip_grad_norm(ps.list, c["max_norm"].get<double>());
    EXPECT_NEAR(norm, want, 2e-6 * want) << name;
    for (size_t i = 0; i < ps.list.size(); ++i) {
      EXPECT_TRUE(all_close("clip " + name + " grad " + std::to_string(i),
                            to_doubles(ps.list[i]->grad), c["clipped"][i], Tolerance{1e-12, 3e-6}));
    }
  }
}

TEST(ClipGradNorm, DisabledByNonPositiveMaxNorm) {
  const json c = load_fixture("clip.json")["cases"][0];
  Params ps = clip_params(c);
  EXPECT_NEAR(clip_grad_norm(ps.list, 0.0), c["norm"].get<double>(),
              2e-6 * c["norm"].get<double>());
  for (size_t i = 0; i < ps.list.size(); ++i) {
    EXPECT_TRUE(
        all_close("unclipped", to_doubles(ps.list[i]->grad), c["grads"][i], Tolerance{0, 0}));
  }
}

TEST(ClipGradNorm, SameBitsForAnyThreadCount) {
  Params ps;
  ps.add("big", {5, 100003}, {});
  ps.add("small", {7}, {});
  ps.list[0]->grad.copy_from(random_f32({5, 100003}, 5, 3.0f));
  ps.list[1]->grad.copy_from(random_f32({7}, 6));
  const int saved = num_threads();
  set_num_threads(1);
  const double one = grad_norm(ps.list);
  set_num_threads(2);
  const double two = grad_norm(ps.list);
  set_num_threads(saved);
  EXPECT_EQ(one, two);
  // sum of squares by hand in long double
  long double s = 0;
  for (const nn::Parameter* p : ps.list) {
    for (double x : to_doubles(p->grad)) s += static_cast<long double>(x) * x;
  }
  EXPECT_NEAR(one, std::sqrt(static_cast<double>(s)), 1e-12 * one);
}

TEST(ClipGradNorm, NonFiniteGradIsReportedAndLeftAlone) {
  Params ps;
  ps.add("layers.0.w", {3, 5}, {});
  ps.add("layers.1.w", {40}, {});
  ps.add("layers.2.w", {9}, {});
  for (nn::Parameter* p : ps.list) p->grad.fill_(1.0f);
  EXPECT_EQ(first_nonfinite_grad(ps.list), "");
  ps.list[2]->grad.data<float>()[4] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(first_nonfinite_grad(ps.list), "layers.2.w");
  ps.list[1]->grad.data<float>()[33] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(first_nonfinite_grad(ps.list), "layers.1.w");
  const double norm = clip_grad_norm(ps.list, 1.0);
  EXPECT_FALSE(std::isfinite(norm));
  EXPECT_EQ(ps.list[0]->grad.data<float>()[0], 1.0f);  // not scaled
  ps.list[1]->grad.data<float>()[33] = 1.0f;
  EXPECT_TRUE(std::isinf(grad_norm(ps.list)));
}

// ---------------------------------------------------------------------------------------------

TEST(LrSchedule, MatchesTorchtitan) {
  const json fx = load_fixture("lr_schedule.json");
  ASSERT_GE(fx["cases"].size(), 10u);
  for (const json& c : fx["cases"]) {
    const LrScheduleConfig cfg{c["steps"], c["warmup_steps"], c["decay_ratio"], c["decay_type"],
                               c["min_lr_factor"]};
    const LrSchedule schedule(cfg);
    const auto want = c["factors"].get<std::vector<double>>();
    ASSERT_EQ(static_cast<int64_t>(want.size()), cfg.steps);
    std::vector<double> got;
    for (int64_t s = 1; s <= cfg.steps; ++s) got.push_back(schedule.factor(s));
    EXPECT_TRUE(all_close(
        str("lr_schedule steps=", cfg.steps, " warmup=", cfg.warmup_steps,
            " decay_ratio=", cfg.decay_ratio, " ", cfg.decay_type, " min=", cfg.min_lr_factor),
        got, want, Tolerance{1e-12, 1e-12}));
  }
}

TEST(LrSchedule, HandValues) {
  // N=10, W=2, linear, no min: D = 8, S = 1; steps 1,2 warm up; step 3 stable; then 1 - k/8.
  const LrSchedule s(LrScheduleConfig{10, 2, -1.0, "linear", 0.0});
  EXPECT_EQ(s.decay_steps(), 8);
  EXPECT_EQ(s.stable_steps(), 1);
  EXPECT_DOUBLE_EQ(s.factor(1), 0.5);
  EXPECT_DOUBLE_EQ(s.factor(2), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(3), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(4), 1.0 - 1.0 / 8);
  EXPECT_DOUBLE_EQ(s.factor(10), 1.0 - 7.0 / 8);
  // Python round() is half-to-even: round(10 * 0.25) = 2.
  EXPECT_EQ(LrSchedule(LrScheduleConfig{10, 2, 0.25, "linear", 0.0}).decay_steps(), 2);
}

TEST(LrSchedule, RejectsBadConfig) {
  EXPECT_NE(error_of([] {
              LrSchedule(LrScheduleConfig{10, 2, -1.0, "exp", 0.0});
            }).find("[lr_schedule] decay_type: expected linear, sqrt or cosine, got 'exp'"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              LrSchedule(LrScheduleConfig{10, 2, 1.5, "linear", 0.0});
            }).find("decay_ratio"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              LrSchedule(LrScheduleConfig{0, 0, -1.0, "linear", 0.0});
            }).find("steps"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              LrSchedule(LrScheduleConfig{10, 0, -1.0, "linear", 2.0});
            }).find("min_lr_factor"),
            std::string::npos);
  const LrSchedule s(LrScheduleConfig{10, 2, -1.0, "linear", 0.0});
  EXPECT_NE(error_of([&] { (void)s.factor(0); }).find("1-based"), std::string::npos);
}

}  // namespace
}  // namespace titan::train
