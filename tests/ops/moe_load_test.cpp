// MoE routing statistics (moe_load): every implementation against the reference (the contract
// fixes every fp64 order, so exactly), the backward against finite differences of the
// probability sums through a softmax, totals from math, and the one-line errors.
#include "titan/ops/moe_load/moe_load.h"

#include <cmath>
#include <string>
#include <vector>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct LoadCase {
  int64_t n, e;
};

std::string name(const LoadCase& c) { return str("N=", c.n, " E=", c.e); }

// Rows of softmax(logits) from a fixed seed.
Doubles softmax_rows(const Doubles& z, int64_t n, int64_t e) {
  Doubles p(z.size());
  for (int64_t t = 0; t < n; ++t) {
    double m = z[static_cast<size_t>(t * e)], s = 0.0;
    for (int64_t j = 0; j < e; ++j) m = std::max(m, z[static_cast<size_t>(t * e + j)]);
    for (int64_t j = 0; j < e; ++j) s += p[static_cast<size_t>(t * e + j)] = std::exp(z[static_cast<size_t>(t * e + j)] - m);
    for (int64_t j = 0; j < e; ++j) p[static_cast<size_t>(t * e + j)] /= s;
  }
  return p;
}

Tensor probs_of(const LoadCase& c) {
  Tensor p = Tensor::empty({c.n, c.e});
  const Doubles pd = softmax_rows(random_doubles(static_cast<size_t>(c.n * c.e), 11, 2.0), c.n, c.e);
  for (size_t i = 0; i < pd.size(); ++i) p.data<float>()[i] = static_cast<float>(pd[i]);
  return p;
}

Tensor counts_of(const LoadCase& c) {
  Tensor counts = Tensor::empty({c.e}, DType::i64);
  for (int64_t j = 0; j < c.e; ++j) counts.data<int64_t>()[j] = (j * 37 + 5) % (2 * c.n + 1);
  return counts;
}

Tensor f64_of(const Doubles& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::f64);
  std::copy(v.begin(), v.end(), t.data<double>());
  return t;
}

// The values of an f64 tensor (to_doubles reads through f32).
Doubles f64_values(const Tensor& t) { return Doubles(t.data<double>(), t.data<double>() + t.numel()); }

// Each fp64 total as its own exact output (the harness's tensor outputs are f32 or integers).
void add_f64(Outputs& out, const std::string& name, const Tensor& t) {
  const Doubles v = f64_values(t);
  for (size_t j = 0; j < v.size(); ++j) out.emplace_back(str(name, "[", j, "]"), v[j], kExact);
}

// d(prob_sums) and the running totals the forward adds into (not zero: += is checked).
Tensor dsums_of(const LoadCase& c) { return f64_of(random_doubles(static_cast<size_t>(c.e), 13, 0.5)); }

RefFunction load_reference(const LoadCase& c) {
  auto forward = [=](const std::vector<Doubles>& in) {
    const Doubles p = softmax_rows(in[0], c.n, c.e);
    Doubles sums(static_cast<size_t>(c.e), 0.0);
    ref::moe_load_prob_sums(c.n, c.e, p.data(), sums.data());
    return sums;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dsums) {
    const Doubles p = softmax_rows(in[0], c.n, c.e);
    Doubles dz(p.size(), 7.0);  // written: 7 must not survive
    ref::moe_load_backward(c.n, c.e, p.data(), dsums.data(), dz.data());
    return std::vector<Doubles>{dz};
  };
  return {{"logits"}, {random_doubles(static_cast<size_t>(c.n * c.e), 3)}, forward, backward};
}

OpTest<MoeLoadImpl, LoadCase> load_test() {
  return {
      .table = &moe_load_table(),
      .cases = {{1, 1}, {3, 2}, {7, 5}, {13, 8}, {33, 9}, {257, 17}, {4099, 64}, {0, 3}},
      .name = name,
      .forward = [](const MoeLoadImpl& impl, const LoadCase& c) -> Outputs {
        Tensor load = Tensor::empty({c.e}, DType::i64);
        for (int64_t j = 0; j < c.e; ++j) load.data<int64_t>()[j] = 1000 + j;
        Tensor count_sums = f64_of(random_doubles(static_cast<size_t>(c.e), 17, 9.0));
        Tensor prob_sums = f64_of(random_doubles(static_cast<size_t>(c.e), 19, 3.0));
        impl.forward(counts_of(c), probs_of(c), load, count_sums, prob_sums);
        Tensor load_only = Tensor::zeros({c.e}, DType::i64), none_c, none_p;
        impl.forward(counts_of(c), Tensor(), load_only, none_c, none_p);  // no aux totals
        Outputs out{{"load", load}, {"load_only", load_only}};
        add_f64(out, "count_sums", count_sums);
        add_f64(out, "prob_sums", prob_sums);
        return out;
      },
      .backward = [](const MoeLoadImpl& impl, const LoadCase& c) -> Outputs {
        Tensor dz = garbage({c.n, c.e});
        impl.backward(probs_of(c), dsums_of(c), dz);
        return {{"dlogits", dz, kExact}};
      },
      .threads = {1, 3},
      .reference = load_reference,
      .fd_cases = {{1, 1}, {3, 2}, {5, 7}, {9, 4}},
  };
}

TEST(MoeLoad, ReferenceBackwardMatchesFiniteDifferences) { sweep(load_test(), {Mode::gradient}); }
TEST(MoeLoad, KernelsMatchReference) { sweep(load_test(), {Mode::forward, Mode::backward}); }

// Probabilities that are exact in f32 and fp64 (quarters): the sums and the gradient are known.
// Two tokens over E = 2: p = [0.25, 0.75], [0.5, 0.5]; counts [3, 1]; dsums q = [1, -1].
//   prob_sums = [0.75, 1.25] (plus the running 10, 20), count_sums = [3, 1] (plus 1, 2),
//   load = [3, 1] (plus 5, 6);  <p, q> = -0.5, 0  ->  dz = [0.25 * 1.5, 0.75 * -0.5], [0.5, -0.5].
TEST(MoeLoad, ValuesFromMath) {
  Tensor probs = Tensor::empty({2, 2});
  const float pv[] = {0.25f, 0.75f, 0.5f, 0.5f};
  std::copy(std::begin(pv), std::end(pv), probs.data<float>());
  Tensor counts = Tensor::empty({2}, DType::i64);
  counts.data<int64_t>()[0] = 3, counts.data<int64_t>()[1] = 1;
  for (const MoeLoadImpl& impl : moe_load_table().impls()) {
    Tensor load = Tensor::empty({2}, DType::i64);
    load.data<int64_t>()[0] = 5, load.data<int64_t>()[1] = 6;
    Tensor count_sums = f64_of({1, 2}), prob_sums = f64_of({10, 20});
    impl.forward(counts, probs, load, count_sums, prob_sums);
    EXPECT_EQ(to_doubles(load), (Doubles{8, 7})) << impl.name;
    EXPECT_EQ(f64_values(count_sums), (Doubles{4, 3})) << impl.name;
    EXPECT_EQ(f64_values(prob_sums), (Doubles{10.75, 21.25})) << impl.name;
    Tensor dz = garbage({2, 2});
    impl.backward(probs, f64_of({1, -1}), dz);
    EXPECT_EQ(to_doubles(dz), (Doubles{0.375, -0.375, 0.5, -0.5})) << impl.name;
  }
  EXPECT_EQ(moe_load_table().impls().back().name, "moe_load_cpu");
}

TEST(MoeLoad, ErrorsNameTheTensor) {
  const LoadCase c{4, 3};
  Tensor load = Tensor::zeros({3}, DType::i64), short_load = Tensor::zeros({2}, DType::i64);
  Tensor sums = Tensor::zeros({3}, DType::f64), none;
  EXPECT_NE(error_of([&] { moe_load_forward(counts_of(c), probs_of(c), short_load, none, none); })
                .find("[moe_load] load_E"),
            std::string::npos);
  EXPECT_NE(error_of([&] { moe_load_forward(counts_of(c), probs_of(c), load, sums, none); }).find("both"),
            std::string::npos);
  Tensor sums2 = Tensor::zeros({3}, DType::f64);
  EXPECT_NE(error_of([&] { moe_load_forward(counts_of(c), Tensor::zeros({4, 2}), load, sums, sums2); })
                .find("[moe_load] probs_NE"),
            std::string::npos);
  Tensor dz = Tensor::empty({4, 2});
  EXPECT_NE(error_of([&] { moe_load_backward(probs_of(c), sums, dz); }).find("[moe_load] dlogits_NE"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
