// The shared op test harness. An op's test lists cases; these helpers run the three checks:
//  1. the reference backward (double instance) against central finite differences;
//  2. every registered kernel against the reference, forward and backward;
//  3. (models/) composite layers against Hugging Face fixtures.
// Failures print op, case, tensor, index, got, want and the max error.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "titan/core/tensor.h"

namespace titan::testing {

struct Tolerance {
  double atol;
  double rtol;
};
// Kernel vs reference, both in f32 (different summation orders).
constexpr Tolerance kF32Tol{2e-5, 2e-4};
// Analytic (double) vs finite differences (double).
constexpr Tolerance kFdTol{1e-6, 1e-5};

Tensor random_f32(const Shape& shape, uint64_t seed, float scale = 1.0f);
std::vector<double> random_doubles(size_t n, uint64_t seed, double scale = 1.0);
std::vector<double> to_doubles(const Tensor& t);
Tensor from_doubles(const std::vector<double>& v, const Shape& shape);

// |got - want| <= atol + rtol * |want| for every element.
::testing::AssertionResult all_close(const std::string& where, const Tensor& got, const Tensor& want,
                                     Tolerance tol);
::testing::AssertionResult all_close(const std::string& where, const std::vector<double>& got,
                                     const std::vector<double>& want, Tolerance tol);

// Central differences of f at x: (f(x + h e_i) - f(x - h e_i)) / 2h, or the 4-point stencil
// (-f(x+2h) + 8f(x+h) - 8f(x-h) + f(x-2h)) / 12h when `precise`.
std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& f,
                                     std::vector<double> x, double h = 1e-5, bool precise = false);

double dot(const std::vector<double>& a, const std::vector<double>& b);

// The message of the titan::Error that fn throws, or "(no error)".
std::string error_of(const std::function<void()>& fn);

// Path of a file under the source tree (tests/fixtures/...).
std::string source_path(const std::string& relative);

}  // namespace titan::testing
