// The shared op test harness (ggml's test-backend-ops, for our registry). An op's test declares
// its cases once in an OpTest; sweep() runs case x implementation x mode:
//   forward / backward: every implementation after the reference in <op>_table() (the CPU kernel,
//     then whatever plugins register) against the reference, output by output, per-dtype
//     tolerance atol + rtol * |ref|;
//   gradient: the fp64 reference backward against finite differences of <dy, forward(inputs)>.
// (models/ checks composite layers against Hugging Face fixtures.)
// Failures print op, case, implementation, output, index, got, want and the max error.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "titan/core/tensor.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/ops/registry.h"

namespace titan::testing {

struct Tolerance {
  double atol;
  double rtol;
};
// Kernel vs reference, both in f32 (different summation orders).
constexpr Tolerance kF32Tol{2e-5, 2e-4};
// Analytic (double) vs finite differences (double).
constexpr Tolerance kFdTol{1e-6, 1e-5};
// {0, 0} means identical values, the sign of zero included (see compare in op_harness.cpp).
constexpr Tolerance kExact{0.0, 0.0};

// Kernel vs reference for outputs of this dtype (integer outputs, such as chosen experts and
// layouts, exactly). Throws for a dtype no kernel produces yet: add its tolerance here when one
// does.
Tolerance tolerance_for(DType dtype);

Tensor random_f32(const Shape& shape, uint64_t seed, float scale = 1.0f);
std::vector<double> random_doubles(size_t n, uint64_t seed, double scale = 1.0);
std::vector<double> to_doubles(const Tensor& t);  // float (f64 exactly) or integer (i32, i64) tensors
Tensor from_doubles(const std::vector<double>& v, const Shape& shape);

// |got - want| <= atol + rtol * |want| for every element.
::testing::AssertionResult all_close(const std::string& where, const Tensor& got, const Tensor& want,
                                     Tolerance tol);
// ||got - want||_F / ||want||_F over f32 tensors of one shape: how far a result that may differ by
// roundings everywhere (a bf16 iteration, such as Newton-Schulz) is from the reference as a whole.
double relative_difference(const Tensor& got, const Tensor& want);
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

// Sets the thread count for a scope and restores it after.
class ThreadCount {
 public:
  explicit ThreadCount(int n);
  ~ThreadCount();
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

// ---- The sweep --------------------------------------------------------------------------------

// One named result of running an implementation on a case (a tensor, a gradient, a loss), and the
// tolerance it is held to (a tensor's default: tolerance_for its dtype).
struct Output {
  Output(std::string name, const Tensor& t);
  Output(std::string name, const Tensor& t, Tolerance tol);
  Output(std::string name, double value, Tolerance tol);
  std::string name;
  std::vector<double> values;
  Tolerance tol;
};
using Outputs = std::vector<Output>;

// Written gradients (=) start from this, so that a kernel that accumulates into them fails.
Tensor garbage(const Shape& shape);

// The fp64 reference of one case as a function of its differentiable inputs. The harness draws a
// random dy of forward's size and compares backward(inputs, dy)[i] with the numeric gradient of
// <dy, forward(inputs)> in inputs[i].
using Doubles = std::vector<double>;
struct RefFunction {
  std::vector<std::string> names;  // of the inputs: "x", "weight"
  std::vector<Doubles> inputs;
  std::function<Doubles(const std::vector<Doubles>& inputs)> forward;  // every output, flat
  // One gradient per input; parameter gradients start from zero (the harness does not add them).
  std::function<std::vector<Doubles>(const std::vector<Doubles>& inputs, const Doubles& dy)> backward;
};

struct FdOptions {
  size_t max_elements = 1500;  // cases with more inputs are skipped: the check costs O(size^2)
  double h = 1e-5;
  bool precise = false;  // the 4-point stencil (ggml's grad_precise)
};

// isa_levels: every CPU implementation's forward (and backward) with the x86-64-v4 instantiations
// of its TITAN_SIMD_KERNELs (plain loops included) and with the AVX2 ones (kernels/cpu/simd.h),
// equal bit for bit. Compares nothing, and says so, on a CPU without x86-64-v4 or in a TITAN_BASELINE_ONLY build.
enum class Mode { forward, backward, gradient, isa_levels };
const char* mode_name(Mode mode);

// What an op's test declares. Every run uses inputs made from the case alone (fixed seeds), so
// the reference and each implementation see the same values.
template <class Impl, class Case>
struct OpTest {
  const ops::OpTable<Impl>* table = nullptr;
  std::vector<Case> cases = {};
  std::function<std::string(const Case&)> name = {};
  // impl.supports on the case's inputs; needed once any implementation has a supports predicate.
  std::function<bool(const Impl&, const Case&)> supports = {};
  std::function<Outputs(const Impl&, const Case&)> forward = {};
  // Gradients (input gradients from garbage(), parameter gradients from the same non-zero values
  // in every run, so that the accumulation rule is checked); null for forward-only ops.
  std::function<Outputs(const Impl&, const Case&)> backward = {};
  // Thread counts to run the implementations at (the reference runs once); empty: as set.
  std::vector<int> threads = {};
  // Gradient mode: the fp64 reference of a case, over fd_cases (empty: cases); null: none.
  std::function<RefFunction(const Case&)> reference = {};
  std::vector<Case> fd_cases = {};
  FdOptions fd = {};
};

// Non-template halves of sweep (op_harness.cpp).
void expect_outputs_match(const std::string& where, const Outputs& got, const Outputs& want);
bool expect_reference_gradient(const std::string& where, const RefFunction& f, const FdOptions& fd);

// Runs the modes over every case and implementation; mismatches become gtest failures. A mode
// that compares nothing (every case skipped) fails too, so no sweep passes vacuously.
template <class Impl, class Case>
void sweep(const OpTest<Impl, Case>& t, std::initializer_list<Mode> modes) {
  const std::string& op = t.table->op_name();
  for (const Mode mode : modes) {
    int compared = 0;
    if (mode == Mode::gradient) {
      ASSERT_TRUE(t.reference) << op << ": no fp64 reference given for the gradient mode";
      for (const Case& c : t.fd_cases.empty() ? t.cases : t.fd_cases) {
        compared += expect_reference_gradient(str(t.table->ref().name, " [", t.name(c), "]"),
                                              t.reference(c), t.fd);
      }
    } else if (mode == Mode::isa_levels) {
      if (!kernels::simd_v4_supported()) {
        std::printf("%s isa_levels: no x86-64-v4 instantiation runs here, nothing compared\n", op.c_str());
        continue;
      }
      for (const Case& c : t.cases) {
        for (size_t i = 1; i < t.table->impls().size(); ++i) {
          const Impl& impl = t.table->impls()[i];
          if (impl.device != Device::cpu || (impl.supports != nullptr && !t.supports(impl, c))) continue;
          for (const auto* run : {&t.forward, &t.backward}) {
            if (!*run) continue;
            const Outputs v4 = (*run)(impl, c);
            Outputs v3;
            {
              const kernels::SimdBaselineScope baseline;
              v3 = (*run)(impl, c);
            }
            Outputs exact = v4;
            for (Output& o : exact) o.tol = kExact;
            expect_outputs_match(str(op, " [", t.name(c), "] ", impl.name, " AVX2 vs x86-64-v4 ",
                                     run == &t.forward ? "forward" : "backward"),
                                 v3, exact);
            ++compared;
          }
        }
      }
    } else {
      const auto& run = mode == Mode::forward ? t.forward : t.backward;
      ASSERT_TRUE(run) << op << ": no " << mode_name(mode) << " given";
      const std::vector<int> threads = t.threads.empty() ? std::vector<int>{0} : t.threads;
      for (const Case& c : t.cases) {
        const Outputs want = run(t.table->ref(), c);
        for (size_t i = 1; i < t.table->impls().size(); ++i) {
          const Impl& impl = t.table->impls()[i];
          // Runs take host tensors; a device kernel needs its inputs moved there and its outputs
          // back, which the harness does not do yet. Loud rather than skipped.
          if (impl.device != Device::cpu) {
            ADD_FAILURE() << op << ": " << impl.name << " runs on " << device_name(impl.device)
                          << "; the sweep only runs host (cpu) implementations so far";
            continue;
          }
          if (impl.supports != nullptr) {
            ASSERT_TRUE(t.supports) << op << ": " << impl.name << " has a supports predicate; give the OpTest one";
            if (!t.supports(impl, c)) continue;
          }
          for (const int n : threads) {
            const ThreadCount scope(n);
            const Outputs got = run(impl, c);
            expect_outputs_match(str(op, " [", t.name(c), "] ", impl.name,
                                     n > 0 ? str(" threads=", n) : "", " ", mode_name(mode)),
                                 got, want);
            ++compared;
          }
        }
      }
    }
    EXPECT_GT(compared, 0) << op << " " << mode_name(mode) << ": compared nothing";
  }
}

}  // namespace titan::testing
