// gemm_bf16(): titan's own kernels where they measured as fast: AMX tiles wherever oneDNN would use
// them (gemm_bf16_uses_amx below), AVX-512-BF16 for large products (use_titan_kernel), else
// oneDNN's matmul primitive: bf16 A and B, f32 C, f32 accumulation. Where oneDNN has only its
// reference bf16 kernel (AVX2, or AVX-512 without BF16), titan runs its AVX2 FMA kernel, which
// widens A and B to f32 (exact) as it packs them (gemm_bf16_avx2.h). oneDNN primitives are created
// once per shape and cached (a training step repeats the same few shapes).
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "titan/core/dtype.h"
#include "titan/core/error.h"
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/cast.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/gemm_bf16_amx.h"
#include "titan/kernels/cpu/gemm_bf16_avx2.h"
#include "titan/kernels/cpu/gemm_bf16_avx512.h"

namespace titan::kernels {
namespace {

// (trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta)
using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float>;

struct Matmul {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c, scratchpad;
  bool emulated = false;  // oneDNN offers only its reference kernel for this case
};

struct Cache {
  std::mutex mutex;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::map<Key, Matmul> entries;
};

Cache& cache() {
  static Cache c;
  return c;
}

// Row-major op(X) [rows, cols] stored with row stride ld, or transposed in storage.
dnnl::memory::desc plain(int64_t rows, int64_t cols, int64_t ld, bool trans, dnnl::memory::data_type dt) {
  const dnnl::memory::dims strides = trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
  return dnnl::memory::desc({rows, cols}, dt, strides);
}

// oneDNN's effective ISA has bf16 instructions (DNNL_MAX_CPU_ISA can lower it).
bool isa_has_bf16() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

// A matmul C = A B on these layouts, alpha and beta as attributes; `emulated`
// where oneDNN offers only its reference kernel.
Matmul make_matmul(const dnnl::memory::desc& a, const dnnl::memory::desc& b, const dnnl::memory::desc& c, float alpha,
                   float beta) {
  Matmul mm;
  mm.a = a, mm.b = b, mm.c = c;
  dnnl::primitive_attr attr;
  // The caller's scratchpad (a per-thread buffer at execution), not the library's: the library
  // shares one between primitives (unless oneDNN is built with DNNL_ENABLE_CONCURRENT_EXEC, which
  // Debian's is not), and gemm_bf16 runs concurrently from inside parallel loops (attention's tiles,
  // the MoE experts' tiles). With the shared one, two threads' products overwrote each other's
  // packed operands (MoeModel.Bf16StepAgreesOnOneAndTwoThreads: gradients off by up to 100%).
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, cache().engine);
  const std::string impl = pd.impl_info_str();
  mm.emulated = impl.rfind("ref", 0) == 0;
  if (!mm.emulated) {
    mm.primitive = dnnl::matmul(pd);
    mm.scratchpad = pd.scratchpad_desc();
  }
  return mm;
}

Matmul make(const Key& key) {
  const auto [trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta] = key;
  using dt = dnnl::memory::data_type;
  if (!isa_has_bf16()) {
    Matmul mm;
    mm.emulated = true;
    return mm;
  }
  return make_matmul(plain(m, k, lda, trans_a, dt::bf16), plain(k, n, ldb, trans_b, dt::bf16),
                     plain(m, n, ldc, false, dt::f32), alpha, beta);
}

// The cached matmul for `key`, built on first use.
const Matmul& matmul_for(const Key& key) {
  Cache& cc = cache();
  std::lock_guard<std::mutex> lock(cc.mutex);
  auto it = cc.entries.find(key);
  if (it == cc.entries.end()) {
    try {
      it = cc.entries.emplace(key, make(key)).first;
    } catch (const dnnl::error& e) {
      const auto [trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta] = key;
      TITAN_FAIL("[gemm_bf16] oneDNN could not build a bf16 matmul for M=", m, " N=", n, " K=", k, " lda=", lda,
                 " ldb=", ldb, " ldc=", ldc, ": ", e.what());
    }
  }
  return it->second;  // std::map: the reference stays valid as entries are added
}

// Runs a built matmul on the calling thread, with its stream and its scratchpad (see make_matmul).
void run(const Matmul& mm, const void* a, const void* b, float* c) {
  static thread_local dnnl::stream stream{cache().engine};
  static thread_local std::vector<uint8_t> scratch;
  if (scratch.size() < mm.scratchpad.get_size()) scratch.resize(mm.scratchpad.get_size());
  const dnnl::engine& engine = cache().engine;
  dnnl::memory am(mm.a, engine, const_cast<void*>(a)), bm(mm.b, engine, const_cast<void*>(b)), cm(mm.c, engine, c),
      sm(mm.scratchpad, engine, scratch.data());
  mm.primitive.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}});
  stream.wait();
}

// Widens op(X)'s storage ([rows, cols] or its transpose, row stride ld) to a dense f32 copy with
// the same layout and stride.
std::vector<float> widen(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, bool trans) {
  const int64_t stored_rows = trans ? cols : rows, stored_cols = trans ? rows : cols;
  std::vector<float> out(static_cast<size_t>(stored_rows * ld));
  parallel_for(stored_rows, 16, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) cast_bf16_to_f32(x + r * ld, out.data() + r * ld, stored_cols);
  });
  return out;
}

// titan's AVX-512-BF16 kernel (gemm_bf16_avx512.h) where the CPU has it and no AMX (AMX tiles are
// far faster: gemm_bf16_uses_amx below), and DNNL_MAX_CPU_ISA does not cap oneDNN below bf16 (a cap asks for the
// emulated path, e.g. the sanitizer pass's AVX2 run), for products of at least kTitanMinFlops;
// oneDNN below. Measured on Zen 4 (docs/performance.md (t)): at the bench config's linear and
// head shapes titan's kernel is within a few % of oneDNN's (80-93% of the dot-product peak, ahead
// at the head's dX and dW); at attention's 128 x 128 x 128 tiles oneDNN is 15% faster. The titan kernel also keeps no state per
// shape, where oneDNN compiles and caches a primitive for every new (M, N, K): the MoE experts'
// tiles vary with the routing every step.
constexpr double kTitanMinFlops = 64.0 * 1024 * 1024;

bool use_titan_kernel(int64_t m, int64_t n, int64_t k) {
  static const bool available =
      gemm_bf16_avx512_supported() && dnnl_get_effective_cpu_isa() == dnnl_cpu_isa_avx512_core_bf16;
  return available && 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >= kTitanMinFlops;
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (gemm_bf16_uses_amx()) {
    gemm_bf16_amx(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else if (use_titan_kernel(m, n, k)) {
    gemm_bf16_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else if (gemm_bf16_is_emulated()) {
    gemm_bf16_avx2(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    gemm_bf16_onednn(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

void gemm_bf16_round_b(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                       int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (gemm_bf16_uses_amx()) {
    gemm_bf16_amx(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (use_titan_kernel(m, n, k)) {
    gemm_bf16_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (gemm_bf16_is_emulated()) {
    gemm_bf16_avx2(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // B as stored: n rows of k values (trans_b) or k rows of n, at stride ldb; rounded compactly.
  const int64_t rows = trans_b ? n : k, cols = trans_b ? k : n;
  std::vector<uint16_t> rounded(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) cast_f32_to_bf16(b + r * ldb, rounded.data() + r * cols, cols);
  gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, rounded.data(), std::max<int64_t>(cols, 1), beta, c, ldc);
}

bool gemm_bf16_rounds_b_while_packing() {
  return gemm_bf16_uses_amx() || use_titan_kernel(1 << 12, 1 << 12, 1 << 12) || gemm_bf16_is_emulated();
}

void gemm_of(DType a_dtype, DType b_dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
             const void* a, int64_t lda, const void* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  TITAN_CHECK((a_dtype == DType::f32 && b_dtype == DType::f32) ||
                  (a_dtype == DType::bf16 && (b_dtype == DType::bf16 || b_dtype == DType::f32)),
              "[gemm] operands ", dtype_name(a_dtype), " x ", dtype_name(b_dtype), ": expected f32 x f32, bf16 x bf16 "
              "or bf16 x f32");
  if (a_dtype == DType::f32) {
    gemm(trans_a, trans_b, m, n, k, alpha, static_cast<const float*>(a), lda, static_cast<const float*>(b), ldb, beta,
         c, ldc);
  } else if (b_dtype == DType::f32) {
    gemm_bf16_round_b(trans_a, trans_b, m, n, k, alpha, static_cast<const uint16_t*>(a), lda,
                      static_cast<const float*>(b), ldb, beta, c, ldc);
  } else {
    gemm_bf16(trans_a, trans_b, m, n, k, alpha, static_cast<const uint16_t*>(a), lda, static_cast<const uint16_t*>(b),
              ldb, beta, c, ldc);
  }
}

void gemm_bf16_onednn(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                      int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta C (oneDNN rejects empty reductions)
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    }
    return;
  }
  const Matmul& mm = matmul_for(Key{trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta});
  if (mm.emulated) {
    const std::vector<float> a32 = widen(a, m, k, lda, trans_a), b32 = widen(b, k, n, ldb, trans_b);
    gemm(trans_a, trans_b, m, n, k, alpha, a32.data(), lda, b32.data(), ldb, beta, c, ldc);
    return;
  }
  run(mm, a, b, c);
}

const char* gemm_bf16_backend_name() {
  static const std::string name = [] {
    if (gemm_bf16_is_emulated()) return std::string("titan AVX2 FMA kernel (bf16 widened to f32 as packed)");
    if (gemm_bf16_uses_amx()) return std::string("titan AMX kernel");
    const bool titan = use_titan_kernel(1 << 12, 1 << 12, 1 << 12);
    const std::string onednn = "oneDNN bf16 matmul";
    const auto mflop = static_cast<int64_t>(kTitanMinFlops / (1024 * 1024));
    return titan ? str("titan AVX-512-BF16 kernel from ", mflop, " MFLOP, ", onednn, " below") : onednn;
  }();
  return name.c_str();
}

bool gemm_bf16_is_emulated() {
  static const bool emulated = [] {
    const Key key{false, true, 64, 64, 64, 64, 64, 64, 1.0f, 0.0f};
    return make(key).emulated;
  }();
  return emulated;
}

namespace {

// Packing pays where titan's AMX kernel runs and op(B) is large (the head's weight; a linear
// layer's products are one call each, nothing to share).
constexpr int64_t kPackMinElements = int64_t{1} << 22;

bool packs(int64_t k, int64_t n) { return k * n >= kPackMinElements && gemm_bf16_uses_amx(); }

}  // namespace

int64_t gemm_bf16_packed_b_bytes(int64_t k, int64_t n) { return packs(k, n) ? gemm_bf16_amx_packed_b_bytes(k, n) : 0; }

void gemm_bf16_pack_b(bool trans_b, int64_t k, int64_t n, const uint16_t* b, int64_t ldb, void* packed) {
  if (packs(k, n)) gemm_bf16_amx_pack_b(trans_b, k, n, b, ldb, packed);
}

void gemm_bf16_pack_b(bool trans_b, int64_t k, int64_t n, const float* b, int64_t ldb, void* packed) {
  if (packs(k, n)) gemm_bf16_amx_pack_b(trans_b, k, n, b, ldb, packed);
}

namespace {
// The packed B where there is one, else B as stored (bf16, or f32 rounded as it is read).
template <class T>
void packed_or_stored(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda, bool trans_b,
                      const T* b, int64_t ldb, const void* packed, float beta, float* c, int64_t ldc) {
  if (packed != nullptr && packs(k, n)) {
    gemm_bf16_amx_packed(m, n, k, alpha, a, lda, packed, beta, c, ldc);
  } else if constexpr (std::is_same_v<T, float>) {
    gemm_bf16_round_b(false, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    gemm_bf16(false, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}
}  // namespace

void gemm_bf16_packed(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda, bool trans_b,
                      const uint16_t* b, int64_t ldb, const void* packed, float beta, float* c, int64_t ldc) {
  packed_or_stored(m, n, k, alpha, a, lda, trans_b, b, ldb, packed, beta, c, ldc);
}

void gemm_bf16_packed(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda, bool trans_b,
                      const float* b, int64_t ldb, const void* packed, float beta, float* c, int64_t ldc) {
  packed_or_stored(m, n, k, alpha, a, lda, trans_b, b, ldb, packed, beta, c, ldc);
}

// titan's AMX kernel (gemm_bf16_amx.h) wherever oneDNN would run its AMX matmul (DNNL_MAX_CPU_ISA
// can cap both off) and Linux grants the tile state, at every size: on 2 Sapphire Rapids cores it
// was as fast or faster on every bench-config product, 1.0-1.6x on the linear layers, 1.5-3.6x on
// the head's three, and as fast on attention's 128 x 128 x 128 tiles, where oneDNN's per-call
// set-up cost it most (docs/performance.md (aa)). It also keeps no state per shape.
bool gemm_bf16_uses_amx() {
  static const bool amx = !gemm_bf16_is_emulated() &&
                          dnnl_get_effective_cpu_isa() == dnnl_cpu_isa_avx512_core_amx && gemm_bf16_amx_supported();
  return amx;
}

}  // namespace titan::kernels
