// Eigen's GEMM behind a C entry point, built as a loadable module (one per ISA flavour) so that
// gemm_libs_bench can dlopen it with RTLD_LOCAL like the BLAS libraries. Everything here is
// hidden except the three entry points, so the AVX-512 build's template instances never
// replace the rest of the program's code. Threads: Eigen's OpenMP path (-fopenmp).
#include <Eigen/Core>
#include <cstdint>
#include <string>

#define TITAN_EIGEN_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using Map = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

template <class A, class B>
void accumulate(Map& c, float alpha, const A& a, const B& b) {
  c.noalias() += alpha * a * b;
}
}  // namespace

TITAN_EIGEN_EXPORT void titan_eigen_set_threads(int threads) { Eigen::setNbThreads(threads); }

TITAN_EIGEN_EXPORT const char* titan_eigen_info() {
  static const std::string info = "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
                                  std::to_string(EIGEN_MAJOR_VERSION) + "." +
                                  std::to_string(EIGEN_MINOR_VERSION) + " (" +
                                  Eigen::SimdInstructionSetsInUse() + ", " +
                                  std::to_string(Eigen::nbThreads()) + " threads)";
  return info.c_str();
}

// Row-major C[M, N] = alpha op(A) op(B) + beta C, the kernels::gemm contract.
TITAN_EIGEN_EXPORT void titan_eigen_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                          float alpha, const float* a, int64_t lda, const float* b,
                                          int64_t ldb, float beta, float* c, int64_t ldc) {
  Map cm(c, m, n, Eigen::OuterStride<>(ldc));
  if (beta == 0.0f) {
    cm.setZero();
  } else if (beta != 1.0f) {
    cm *= beta;
  }
  const ConstMap am(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
  const ConstMap bm(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
  if (trans_a && trans_b) {
    accumulate(cm, alpha, am.transpose(), bm.transpose());
  } else if (trans_a) {
    accumulate(cm, alpha, am.transpose(), bm);
  } else if (trans_b) {
    accumulate(cm, alpha, am, bm.transpose());
  } else {
    accumulate(cm, alpha, am, bm);
  }
}
