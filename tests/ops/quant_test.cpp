// quantize / dequantize (QLoRA's NF4 and int8 base formats) against bitsandbytes
// (tests/fixtures/quant/quant.safetensors, made by tools/make_quant_fixtures.py): codes, scales and
// dequantized values equal to the bit, for every kernel; kernels against the reference on larger
// shapes and both thread counts; bf16 output; argument errors.
#include <cmath>
#include <cstring>

#include "ops/op_harness.h"
#include "titan/checkpoint/gguf.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/core/ggml_blocks.h"
#include "titan/ops/quantize/quantize.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// The first differing element of two same-shaped tensors, for failure messages.
std::string first_difference(const Tensor& got, const Tensor& want) {
  const auto* g = static_cast<const uint8_t*>(got.raw_data());
  const auto* w = static_cast<const uint8_t*>(want.raw_data());
  for (size_t i = 0; i < std::min(got.nbytes(), want.nbytes()); ++i) {
    if (g[i] != w[i]) return str("byte ", i, ": ", int(g[i]), " vs ", int(w[i]));
  }
  return str("sizes ", got.describe(), " vs ", want.describe());
}

TEST(Quantize, EqualsBitsandbytes) {
  const auto fx = ckpt::SafetensorsFile::open(source_path("tests/fixtures/quant/quant.safetensors"));
  int compared = 0;
  for (int k = 0; fx.find(str("w", k)) != nullptr; ++k) {
    const Tensor w = fx.get(str("w", k)).clone();
    for (const auto& [kind, name] : {std::pair{QuantKind::nf4, "nf4"}, std::pair{QuantKind::int8, "int8"}}) {
      const Tensor want_codes = fx.get(str(name, "_codes", k)).clone();
      const Tensor want_scales = fx.get(str(name, kind == QuantKind::nf4 ? "_absmax" : "_scale", k)).clone();
      const Tensor want_deq = fx.get(str(name, "_deq", k)).clone();
      for (const QuantizeImpl& impl : quantize_table().impls()) {
        Tensor codes = quant_codes(kind, w.shape(), Device::cpu), scales = quant_scales(kind, w.shape(), Device::cpu);
        impl.forward(kind, w, codes, scales);
        EXPECT_TRUE(same_bytes(codes, want_codes)) << impl.name << " " << name << " case " << k << " codes "
                                                   << first_difference(codes, want_codes);
        EXPECT_TRUE(same_bytes(scales, want_scales)) << impl.name << " " << name << " case " << k << " scales "
                                                     << first_difference(scales, want_scales);
        ++compared;
      }
      for (const DequantizeImpl& impl : dequantize_table().impls()) {
        Tensor out = garbage(w.shape());
        impl.forward(kind, want_codes, want_scales, out);
        EXPECT_TRUE(same_bytes(out, want_deq)) << impl.name << " " << name << " case " << k << " "
                                               << first_difference(out, want_deq);
        Tensor out16 = Tensor::empty(w.shape(), DType::bf16);
        impl.forward(kind, want_codes, want_scales, out16);
        EXPECT_TRUE(same_bytes(out16, want_deq.to(DType::bf16))) << impl.name << " " << name << " bf16 case " << k;
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 32);
}

// Larger weights (many NF4 blocks, an odd count, rows split over threads): every kernel gives the
// reference's bits on 1 and 2 threads, and the NF4 round trip is within half a code step of w.
TEST(Quantize, KernelsMatchReference) {
  for (const Shape& shape : {Shape{257, 129}, Shape{64, 1000}}) {
    const Tensor w = random_f32(shape, 21, 0.05f);
    for (const QuantKind kind : {QuantKind::nf4, QuantKind::int8}) {
      Tensor ref_codes = quant_codes(kind, shape, Device::cpu), ref_scales = quant_scales(kind, shape, Device::cpu);
      quantize_impl_ref().forward(kind, w, ref_codes, ref_scales);
      Tensor ref_out = Tensor::empty(shape);
      dequantize_impl_ref().forward(kind, ref_codes, ref_scales, ref_out);
      for (const int threads : {1, 2}) {
        const ThreadCount scope(threads);
        Tensor codes = quant_codes(kind, shape, Device::cpu), scales = quant_scales(kind, shape, Device::cpu);
        quantize_impl_cpu().forward(kind, w, codes, scales);
        EXPECT_TRUE(same_bytes(codes, ref_codes)) << quant_kind_name(kind) << " " << threads << " threads";
        EXPECT_TRUE(same_bytes(scales, ref_scales)) << quant_kind_name(kind) << " " << threads << " threads";
        Tensor out = garbage(shape);
        dequantize_impl_cpu().forward(kind, codes, scales, out);
        EXPECT_TRUE(same_bytes(out, ref_out)) << quant_kind_name(kind) << " " << threads << " threads";
      }
      // The widest NF4 gap is between -1 and -0.6962 (half of it 0.1519 of the block's absmax);
      // int8's half step is 0.5/127 of the row's absmax.
      const double bound = kind == QuantKind::nf4 ? (1.0 - 0.6961928) / 2 + 1e-6 : 0.5 / 127.0 + 1e-6;
      double worst = 0.0;
      const int64_t cols = shape[1];
      for (int64_t i = 0; i < w.numel(); ++i) {
        const float scale = ref_scales.data<float>()[kind == QuantKind::nf4 ? i / kNf4Block : i / cols];
        worst = std::max(worst, std::fabs(double(ref_out.data<float>()[i]) - w.data<float>()[i]) / scale);
      }
      EXPECT_LE(worst, bound) << quant_kind_name(kind);
    }
  }
}

// gguf weights keep a GGUF file's blocks (tests/fixtures/gguf/quant_types: every block type): both
// kernels decode each row as ggml's decoder does (f32 bits; bf16 its rounding) on 1 and 2 threads,
// and q8_0, the one type titan encodes, round-trips through both.
TEST(Quantize, GgufBlocksDecodeAsGgmlInEveryKernel) {
  const ckpt::GgufFile f = ckpt::GgufFile::open(source_path("tests/fixtures/gguf/quant_types/quant_types.gguf"));
  int checked = 0;
  for (const ckpt::GgufTensorInfo& t : f.tensors()) {
    const GgmlTypeInfo& info = ggml_type_info(t.type);
    if (info.block == 1) continue;  // f32 / f16 / bf16 are not block types
    const Shape shape{t.ne[1], t.ne[0]};
    Tensor codes = Tensor::empty({static_cast<int64_t>(t.bytes)}, DType::u8);
    std::memcpy(codes.data<uint8_t>(), f.data(t), t.bytes);
    Tensor scales = Tensor::empty({1});
    scales.data<float>()[0] = static_cast<float>(t.type);
    Tensor want = Tensor::empty(shape);
    const uint64_t row = ggml_row_bytes(info, t.ne[0]);
    for (int64_t r = 0; r < shape[0]; ++r) ggml_dequantize_row(t.type, f.data(t) + r * row, want.data<float>() + r * shape[1], shape[1]);
    for (const DType dtype : {DType::f32, DType::bf16}) {
      const Tensor expected = dtype == DType::f32 ? want : want.to(DType::bf16);
      Tensor ref = garbage(shape).to(dtype);
      dequantize_impl_ref().forward(QuantKind::gguf, codes, scales, ref);
      EXPECT_TRUE(same_bytes(ref, expected)) << info.name;
      for (const int threads : {1, 2}) {
        const ThreadCount scope(threads);
        Tensor out = garbage(shape).to(dtype);
        dequantize_impl_cpu().forward(QuantKind::gguf, codes, scales, out);
        EXPECT_TRUE(same_bytes(out, expected)) << info.name << " " << threads << " threads";
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 8);
  const Tensor w = random_f32({5, 64}, 3, 0.1f);
  Tensor codes = quant_codes(QuantKind::gguf, {5, 64}, Device::cpu), scales = quant_scales(QuantKind::gguf, {5, 64}, Device::cpu);
  quantize(QuantKind::gguf, w, codes, scales);
  Tensor out = Tensor::empty({5, 64});
  dequantize(QuantKind::gguf, codes, scales, out);
  // Half a step of the block's d = amax / 127 (d stored as f16: up to 2^-11 relative more).
  for (int64_t b = 0; b < w.numel() / 32; ++b) {
    float amax = 0.0f;
    for (int64_t i = b * 32; i < b * 32 + 32; ++i) amax = std::max(amax, std::fabs(w.data<float>()[i]));
    const double bound = amax / 127.0 * (0.5 + 127.0 / 2048.0) + 1e-7;
    for (int64_t i = b * 32; i < b * 32 + 32; ++i) EXPECT_NEAR(out.data<float>()[i], w.data<float>()[i], bound) << i;
  }
}

TEST(Quantize, RejectsBadArguments) {
  const Tensor w = Tensor::zeros({4, 64});
  Tensor codes = quant_codes(QuantKind::nf4, {4, 64}, Device::cpu), scales = quant_scales(QuantKind::nf4, {4, 64}, Device::cpu);
  Tensor short_codes = Tensor::zeros({10}, DType::u8);
  EXPECT_NE(error_of([&] { quantize(QuantKind::nf4, w, short_codes, scales); })
                .find("[quantize] codes: expected contiguous u8[128] for a nf4 weight [4, 64]"),
            std::string::npos);
  Tensor vec = Tensor::zeros({64});
  EXPECT_NE(error_of([&] { quantize(QuantKind::nf4, vec, codes, scales); })
                .find("[quantize] w: expected a contiguous f32 or bf16 [out, in] weight"),
            std::string::npos);
  Tensor out = Tensor::zeros({4, 64}), int8_scales = Tensor::zeros({3});
  Tensor int8_codes = quant_codes(QuantKind::int8, {4, 64}, Device::cpu);
  EXPECT_NE(error_of([&] { dequantize(QuantKind::int8, int8_codes, int8_scales, out); })
                .find("[dequantize] scales: expected contiguous f32[4] for a int8 weight [4, 64]"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
