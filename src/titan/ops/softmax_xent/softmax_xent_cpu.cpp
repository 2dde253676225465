// Fused lm_head + cross-entropy on CPU: token chunks of c rows, one [c, V] f32 buffer reused
// for the logits and then, in place, for dlogits. Per chunk: logits = x_c w^T (GEMM), per-row
// max / exp / sum in 16-lane vectors, loss; dlogits = (softmax - onehot) * grad_scale;
// dx_c = dlogits w (GEMM); dw += dlogits^T x_c (GEMM, beta = 1). See softmax_xent.md. With AMX
// the weight is packed once per call (titan's AMX kernel's layout) for the logits products of all
// chunks, and the bf16 dlogits of all chunks are kept for one dx and one dw product at the end.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "titan/core/dtype.h"
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/cast.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/ops/softmax_xent/softmax_xent.h"

namespace titan::ops {

using namespace titan::kernels;

// For rows [begin, end) of the chunk: loss_rows[r] = logsumexp(l_r) - l_r[target_r] (0 where
// ignored). With `grads`, the row is overwritten with (softmax - onehot) * grad_scale (zeros
// where ignored). One exp per logit: exp(l - max) is stored, then scaled by grad_scale / sum.
// With `dlogits_bf16` (row stride v) the gradient, ignored rows' zeros included, goes there,
// rounded, instead of into the row: the bf16 products read only that, and the row's f32 gradient,
// stored and then rounded, wrote the chunk's 178 MB back to memory once more (bench config;
// docs/performance.md (ac), (ae)).
TITAN_SIMD_KERNEL(static void, xent_rows,
                  (int64_t begin, int64_t end, int64_t v, float* logits_cV, const int64_t* targets_c,
                   int64_t ignore_index, bool grads, float grad_scale, double* loss_rows, uint16_t* dlogits_bf16),
                  (begin, end, v, logits_cV, targets_c, ignore_index, grads, grad_scale, loss_rows, dlogits_bf16)) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t v16 = v - v % kLanes, rem = v - v16;
  for (int64_t r = begin; r < end; ++r) {
    float* l = logits_cV + r * v;
    const int64_t target = targets_c[r];
    if (target == ignore_index) {
      loss_rows[r] = 0.0;
      if (dlogits_bf16 != nullptr) {
        std::memset(dlogits_bf16 + r * v, 0, static_cast<size_t>(v) * sizeof(uint16_t));
      } else if (grads) {
        std::memset(l, 0, static_cast<size_t>(v) * sizeof(float));
      }
      continue;
    }
    // Tail lanes padded with -inf: neutral for max, exp(-inf) = 0 for the sum.
    float tail[kLanes];
    std::fill(tail, tail + kLanes, kNegInf);
    std::copy(l + v16, l + v, tail);

    f32x16 max16v = load16<f32x16>(tail);
    for (int64_t j = 0; j < v16; j += kLanes) max16v = max16(max16v, load16<f32x16>(l + j));
    const float max = hmax16(max16v);
    const float target_logit = l[target];

    f32x16 sum16 = {};
    if (grads) {
      for (int64_t j = 0; j < v16; j += kLanes) {
        const f32x16 e = exp16(load16<f32x16>(l + j) - max);
        store16(l + j, e);
        sum16 += e;
      }
    } else {
      for (int64_t j = 0; j < v16; j += kLanes) sum16 += exp16(load16<f32x16>(l + j) - max);
    }
    const f32x16 etail = exp16(load16<f32x16>(tail) - max);
    sum16 += etail;
    const float sum = hsum16(sum16);
    loss_rows[r] = static_cast<double>(max) + std::log(static_cast<double>(sum)) - target_logit;
    if (!grads) continue;

    store16_partial(l + v16, etail, rem);
    const float scale = grad_scale / sum;
    if (dlogits_bf16 != nullptr) {  // only the rounded gradient is read: its f32 values are not stored
      uint16_t* g = dlogits_bf16 + r * v;
#pragma omp simd
      for (int64_t j = 0; j < v; ++j) g[j] = f32_to_bf16(l[j] * scale);
      g[target] = f32_to_bf16(rounded_product(l[target], scale) - grad_scale);
      continue;
    }
    for (int64_t j = 0; j < v16; j += kLanes) store16(l + j, load16<f32x16>(l + j) * scale);
    for (int64_t j = v16; j < v; ++j) l[j] *= scale;
    l[target] -= grad_scale;
  }
}

// The kernel's buffers, on x's device: the one [c, V] f32 logits chunk (logits, then dlogits in
// place) and, with bf16 operands and gradients, their bf16 rounding; with an f32 weight beside a
// bf16 x, where the bf16 GEMM cannot round it while packing, the weight rounded once; with bf16
// operands where the GEMM gains from it (AMX), w^T packed once for the chunks' logits products
// (gemm_bf16_pack_b; an f32 weight rounded as it is packed); where all chunks' bf16 dlogits are
// kept, dlogits_cV holds N rows instead of c. The CPU kernel's memory and, shapes only, the meta
// device's (lm_head_xent_impl_meta).
struct ChunkBuffers {
  Tensor logits_cV, dlogits_cV, w_rounded_VD, w_packed;
};
static ChunkBuffers chunk_buffers(const LmHeadXentArgs& args, const Tensor& x, const Tensor& w, const Tensor& targets,
                                  bool grads) {
  const int64_t v = w.size(0), n = targets.numel(), c = lm_head_xent_chunk_tokens(args, n, v, x.dtype());
  const int64_t dlogits_rows = lm_head_xent_keeps_all_dlogits(args, n, v, x.dtype()) ? n : c;
  const bool bf16 = x.dtype() == DType::bf16;
  const int64_t packed_bytes = bf16 ? gemm_bf16_packed_b_bytes(w.size(1), v) : 0;
  const bool round_w = bf16 && w.dtype() == DType::f32 && !gemm_bf16_rounds_b_while_packing();
  return {Tensor::empty({c, v}, DType::f32, x.device()),
          bf16 && grads ? Tensor::empty({dlogits_rows, v}, DType::bf16, x.device()) : Tensor(),
          round_w ? Tensor::empty(w.shape(), DType::bf16, x.device()) : Tensor(),
          packed_bytes > 0 ? Tensor::empty({packed_bytes}, DType::u8, x.device()) : Tensor()};
}

static LmHeadXentResult run_cpu(const LmHeadXentArgs& args, const Tensor& x, const Tensor& w,
                                const Tensor& targets, float grad_scale, Tensor* dx, Tensor* dw) {
  const int64_t v = w.size(0), d = w.size(1), n = targets.numel();
  const bool grads = dx != nullptr || dw != nullptr;
  const bool bf16 = x.dtype() == DType::bf16;
  const int64_t c = lm_head_xent_chunk_tokens(args, n, v, x.dtype());
  const int64_t* tp = targets.data<int64_t>();

  LmHeadXentResult result;
  if (n == 0) return result;
  // logits_cV: the one [c, V] buffer; logits, then dlogits in place. With bf16 operands the
  // dlogits are also rounded into dlogits_cV (bf16) for the two gradient products.
  ChunkBuffers buffers = chunk_buffers(args, x, w, targets, grads);
  Tensor& logits_cV = buffers.logits_cV;
  float* lp = logits_cV.data<float>();
  Tensor& dlogits_cV = buffers.dlogits_cV;
  std::vector<double> loss_rows(static_cast<size_t>(c));
  // C = op(A) B^T-or-B for A rows of x or dlogits; f32 or bf16 operands by x's dtype.
  const size_t elem = bf16 ? 2 : 4;
  const auto* xb = static_cast<const char*>(x.raw_data());
  Tensor& w_rounded = buffers.w_rounded_VD;
  if (w_rounded.defined()) {
    const float* src = w.data<float>();
    uint16_t* dst = w_rounded.data<uint16_t>();
    parallel_for(v, 64, [&](int64_t rb, int64_t re) { cast_f32_to_bf16(src + rb * d, dst + rb * d, (re - rb) * d); });
  }
  const Tensor& w_used = w_rounded.defined() ? w_rounded : w;
  const void* wp = w_used.raw_data();
  const Tensor& w_packed = buffers.w_packed;
  // fn(the weight as its element type): bf16, or the f32 master that the packing GEMMs round.
  auto with_w = [&](auto&& fn) {
    if (w_used.dtype() == DType::f32) return fn(w_used.data<float>());
    return fn(w_used.data<uint16_t>());
  };
  if (w_packed.defined()) with_w([&](const auto* wd) { gemm_bf16_pack_b(true, d, v, wd, d, w_packed.raw_data()); });
  // op(B) of the products: the weight (bf16, or f32 rounded as it is packed), or x (bf16 or f32).
  auto product = [&](bool trans_a, bool trans_b, int64_t m, int64_t nn, int64_t k, const void* a, int64_t lda,
                     const void* b, int64_t ldb, float beta, float* out, int64_t ldc) {
    gemm_of(x.dtype(), b == wp ? w_used.dtype() : x.dtype(), trans_a, trans_b, m, nn, k, 1.0f, a, lda, b, ldb, beta,
            out, ldc);
  };

  // all: the bf16 dlogits of every chunk kept in dlogits_cV's N rows, dx and dw from them at the end.
  const bool all = grads && lm_head_xent_keeps_all_dlogits(args, n, v, x.dtype());
  for (int64_t c0 = 0; c0 < n; c0 += c) {
    const int64_t cn = std::min(c, n - c0);
    const void* xc = xb + c0 * d * elem;
    const int64_t* tc = tp + c0;
    const int64_t num_valid =
        std::count_if(tc, tc + cn, [&](int64_t t) { return t != args.ignore_index; });
    if (num_valid == 0) {  // nothing to learn from this chunk: zero dx rows (dlogits), skip the GEMMs
      if (all) {
        std::memset(dlogits_cV.data<uint16_t>() + c0 * v, 0, sizeof(uint16_t) * cn * v);
      } else if (dx != nullptr) {
        std::memset(dx->data<float>() + c0 * d, 0, sizeof(float) * cn * d);
      }
      continue;
    }
    if (d == 0) {
      std::memset(lp, 0, sizeof(float) * cn * v);
    } else {
      if (w_packed.defined()) {  // logits_cV = x_cD w_VD^T
        with_w([&](const auto* wd) {
          gemm_bf16_packed(cn, v, d, 1.0f, static_cast<const uint16_t*>(xc), d, true, wd, d, w_packed.raw_data(),
                           0.0f, lp, v);
        });
      } else {
        product(false, true, cn, v, d, xc, d, wp, d, 0.0f, lp, v);
      }
    }
    // With bf16 operands the gradient products read the dlogits rounded: this chunk's rows of dlogits_cV.
    uint16_t* dh = bf16 && grads ? dlogits_cV.data<uint16_t>() + (all ? c0 * v : 0) : nullptr;
    parallel_for(cn, 1, [&](int64_t rb, int64_t re) {
      xent_rows(rb, re, v, lp, tc, args.ignore_index, grads, grad_scale, loss_rows.data(), dh);
    });
    for (int64_t r = 0; r < cn; ++r) result.loss_sum += loss_rows[r];  // fixed order
    result.num_targets += num_valid;
    if (!grads) continue;
    if (all) continue;
    const void* dl = bf16 ? static_cast<const void*>(dh) : lp;
    if (dx != nullptr) {  // dx_cD = dlogits_cV w_VD
      product(false, false, cn, d, v, dl, v, wp, d, 0.0f, dx->data<float>() + c0 * d, d);
    }
    if (dw != nullptr) {  // dw_VD += dlogits_cV^T x_cD
      product(true, false, v, d, cn, dl, v, xc, d, 1.0f, dw->data<float>(), d);
    }
  }
  if (all && d > 0) {  // dx_ND = dlogits_NV w_VD; dw_VD += dlogits_NV^T x_ND
    const uint16_t* dh = dlogits_cV.data<uint16_t>();
    if (dx != nullptr) product(false, false, n, d, v, dh, v, wp, d, 0.0f, dx->data<float>(), d);
    if (dw != nullptr) product(true, false, v, d, n, dh, v, xb, d, 1.0f, dw->data<float>(), d);
  }
  return result;
}

bool lm_head_xent_keeps_all_dlogits(const LmHeadXentArgs& args, int64_t num_tokens, int64_t vocab, DType operands) {
  return operands == DType::bf16 && gemm_bf16_uses_amx() && num_tokens * vocab * 2 <= args.all_dlogits_bytes;
}

static LmHeadXentResult forward_cpu(const LmHeadXentArgs& args, const Tensor& x, const Tensor& w,
                                    const Tensor& targets) {
  return run_cpu(args, x, w, targets, 0.0f, nullptr, nullptr);
}

static LmHeadXentResult backward_cpu(const LmHeadXentArgs& args, const Tensor& x, const Tensor& w,
                                     const Tensor& targets, float grad_scale, Tensor& dx,
                                     Tensor& dw) {
  return run_cpu(args, x, w, targets, grad_scale, dx.defined() ? &dx : nullptr,
                 dw.defined() ? &dw : nullptr);
}

LmHeadXentImpl lm_head_xent_impl_cpu() {
  return {"lm_head_xent_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu};
}

LmHeadXentImpl lm_head_xent_impl_meta() {
  const auto forward = [](const LmHeadXentArgs& args, const Tensor& x, const Tensor& w, const Tensor& targets) {
    if (targets.numel() > 0) (void)chunk_buffers(args, x, w, targets, false);
    return LmHeadXentResult{};
  };
  const auto backward = [](const LmHeadXentArgs& args, const Tensor& x, const Tensor& w, const Tensor& targets, float,
                           Tensor& dx, Tensor& dw) {
    if (targets.numel() > 0) (void)chunk_buffers(args, x, w, targets, dx.defined() || dw.defined());
    return LmHeadXentResult{};
  };
  return {"lm_head_xent_meta", Device::meta, nullptr, forward, backward};
}

}  // namespace titan::ops
