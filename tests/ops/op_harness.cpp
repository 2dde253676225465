#include "ops/op_harness.h"

#include <cmath>

#include "titan/core/parallel.h"
#include "titan/core/rng.h"

namespace titan::testing {

Tensor random_f32(const Shape& shape, uint64_t seed, float scale) {
  Tensor t = Tensor::empty(shape);
  Rng(seed).fill_normal(t.data<float>(), t.numel(), 0.0f, scale);
  return t;
}

std::vector<double> random_doubles(size_t n, uint64_t seed, double scale) {
  Rng rng(seed);
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * rng.normal(i);
  return v;
}

std::vector<double> to_doubles(const Tensor& t) {
  if (t.dtype() == DType::i32 || t.dtype() == DType::i64) {  // ids, counts, layouts: exact in double
    const Tensor c = t.contiguous();
    std::vector<double> v(static_cast<size_t>(c.numel()));
    for (int64_t i = 0; i < c.numel(); ++i) {
      v[i] = c.dtype() == DType::i64 ? static_cast<double>(c.data<int64_t>()[i]) : c.data<int32_t>()[i];
    }
    return v;
  }
  if (t.dtype() == DType::f64) {  // row statistics (vocab_parallel_xent): kept exactly
    const Tensor c = t.contiguous();
    return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
  }
  Tensor c = t.to(DType::f32);
  const float* p = c.data<float>();
  return std::vector<double>(p, p + c.numel());
}

Tensor from_doubles(const std::vector<double>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  return t;
}

static ::testing::AssertionResult compare(const std::string& where, const double* got,
                                          const double* want, size_t n, Tolerance tol) {
  double max_err = 0.0;
  size_t worst = 0, bad = 0;
  size_t first_bad = n;
  // Exact comparisons also tell -0 from +0: bit-identical kernels (elementwise, embedding) must
  // agree on it, and a tolerance would hide it.
  const bool exact = tol.atol == 0.0 && tol.rtol == 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double err = std::fabs(got[i] - want[i]);
    const bool nan = std::isnan(got[i]) != std::isnan(want[i]);
    const bool sign = exact && std::signbit(got[i]) != std::signbit(want[i]) && !std::isnan(want[i]);
    if (nan || sign || err > tol.atol + tol.rtol * std::fabs(want[i])) {
      if (first_bad == n) first_bad = i;
      ++bad;
    }
    if (nan || err > max_err) {
      max_err = nan ? INFINITY : err;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << where << ": " << bad << "/" << n << " elements out of tolerance (atol " << tol.atol
         << ", rtol " << tol.rtol << "); first at index " << first_bad << ": got "
         << got[first_bad] << ", want " << want[first_bad] << "; max err " << max_err
         << " at index " << worst << " (got " << got[worst] << ", want " << want[worst] << ")";
}

double relative_difference(const Tensor& got, const Tensor& want) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = double(got.data<float>()[i]) - want.data<float>()[i];
    num += d * d;
    den += double(want.data<float>()[i]) * want.data<float>()[i];
  }
  return std::sqrt(num / den);
}

::testing::AssertionResult all_close(const std::string& where, const Tensor& got, const Tensor& want,
                                     Tolerance tol) {
  if (got.shape() != want.shape()) {
    return ::testing::AssertionFailure()
           << where << ": shape " << shape_str(got.shape()) << ", want " << shape_str(want.shape());
  }
  const std::vector<double> g = to_doubles(got), w = to_doubles(want);
  return compare(where, g.data(), w.data(), g.size(), tol);
}

::testing::AssertionResult all_close(const std::string& where, const std::vector<double>& got,
                                     const std::vector<double>& want, Tolerance tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << where << ": size " << got.size() << ", want " << want.size();
  }
  return compare(where, got.data(), want.data(), got.size(), tol);
}

std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& f,
                                     std::vector<double> x, double h, bool precise) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    auto at = [&](double delta) {
      x[i] = x0 + delta;
      const double v = f(x);
      x[i] = x0;
      return v;
    };
    grad[i] = precise ? (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h)
                      : (at(h) - at(-h)) / (2 * h);
  }
  return grad;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string source_path(const std::string& relative) {
  return std::string(TITAN_SOURCE_DIR) + "/" + relative;
}

Tolerance tolerance_for(DType dtype) {
  if (dtype == DType::f32) return kF32Tol;
  if (dtype == DType::i32 || dtype == DType::i64) return kExact;  // an index is right or wrong
  throw Error(str("[op_harness] no kernel-vs-reference tolerance for ", dtype_name(dtype),
                  " outputs. HINT: add one to tolerance_for in tests/ops/op_harness.cpp"));
}

ThreadCount::ThreadCount(int n) : saved_(num_threads()) {
  if (n > 0) set_num_threads(n);
}
ThreadCount::~ThreadCount() { set_num_threads(saved_); }

Output::Output(std::string name, const Tensor& t)
    : name(std::move(name)), values(to_doubles(t)), tol(tolerance_for(t.dtype())) {}
Output::Output(std::string name, const Tensor& t, Tolerance tol)
    : name(std::move(name)), values(to_doubles(t)), tol(tol) {}
Output::Output(std::string name, double value, Tolerance tol)
    : name(std::move(name)), values{value}, tol(tol) {}

Tensor garbage(const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  t.fill_(123.0f);
  return t;
}

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::forward: return "forward";
    case Mode::backward: return "backward";
    case Mode::gradient: return "gradient";
    case Mode::isa_levels: return "isa_levels";
  }
  return "?";
}

// Output by output, by name, with the reference's tolerance; an output on one side only is a
// failure (a run that forgets a gradient must not pass).
void expect_outputs_match(const std::string& where, const Outputs& got, const Outputs& want) {
  EXPECT_FALSE(want.empty()) << where << ": the reference produced no outputs";
  for (const Output& w : want) {
    const Output* g = nullptr;
    for (const Output& o : got) {
      if (o.name == w.name) g = &o;
    }
    if (g == nullptr) {
      ADD_FAILURE() << where << ": no output named " << w.name;
      continue;
    }
    EXPECT_TRUE(all_close(where + " " + w.name, g->values, w.values, w.tol));
  }
  for (const Output& o : got) {
    bool found = false;
    for (const Output& w : want) found = found || w.name == o.name;
    EXPECT_TRUE(found) << where << ": output " << o.name << " has no reference counterpart";
  }
}

bool expect_reference_gradient(const std::string& where, const RefFunction& f, const FdOptions& fd) {
  size_t size = 0;
  for (const Doubles& x : f.inputs) size += x.size();
  if (size > fd.max_elements) return false;
  // loss = <dy, y>, so the analytic gradient is backward(inputs, dy).
  const Doubles dy = random_doubles(f.forward(f.inputs).size(), 0x5eed);
  const std::vector<Doubles> grads = f.backward(f.inputs, dy);
  if (grads.size() != f.inputs.size() || f.names.size() != f.inputs.size()) {
    ADD_FAILURE() << where << ": " << f.inputs.size() << " inputs, " << f.names.size() << " names, "
                  << grads.size() << " gradients";
    return true;
  }
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    auto loss = [&](const Doubles& xi) {
      std::vector<Doubles> inputs = f.inputs;
      inputs[i] = xi;
      return dot(f.forward(inputs), dy);
    };
    EXPECT_TRUE(all_close(where + " d" + f.names[i], grads[i],
                          numeric_gradient(loss, f.inputs[i], fd.h, fd.precise), kFdTol));
  }
  return true;
}

}  // namespace titan::testing
