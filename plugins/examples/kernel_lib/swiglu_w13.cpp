// kernel_lib: the analog of the seed's kernel-recipe package, one fused kernel attached by its own
// override. swiglu_w13 replaces every dense layer's feed-forward node with a fused SwiGLU on a w13
// layout: gate and up projections stored as one [2F, D] matrix, so the forward is one GEMM for
// both ([N, D] x [D, 2F]), the activation silu(gate) * up fused into one pass over its output,
// then the down GEMM. The backward mirrors it: dW13 and dx each in one GEMM over [N, 2F].
// Checkpoint names do not change: w1.weight and w3.weight are views of w13's two halves (rows
// [0, F) and [F, 2F)), gradients likewise, so HF import/export and native checkpoints see the
// standard feed_forward.w1/w2/w3 tensors. No biases (HF mlp_bias): its check() says so before
// step 1. Legend: N tokens, D dim, F hidden dim.
#include <dlfcn.h>

#include <cmath>
#include <memory>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/plugins/plugin_api.h"

namespace {

using titan::Tensor;
using titan::kernels::gemm;
namespace nn = titan::nn;
using titan::DType;

class SwiGluW13Node : public nn::FeedForwardConfig {
 public:
  std::vector<std::string> type_chain() const override { return {"SwiGluW13", "FeedForward"}; }
};

class SwiGluW13 : public nn::FeedForwardModule {
 public:
  SwiGluW13(const nn::FeedForwardConfig& c, const std::string& fqn)
      : d_(c.dim), f_(c.hidden_dim), has_bias_(c.bias) {
    w13_ = Tensor::zeros({2 * f_, d_}, DType::f32, nn::parameter_device());
    dw13_ = Tensor::zeros({2 * f_, d_}, DType::f32, nn::parameter_device());
    w1_.fqn = fqn + ".w1.weight";
    w1_.value = w13_.narrow(0, 0, f_);
    w1_.grad = dw13_.narrow(0, 0, f_);
    w3_.fqn = fqn + ".w3.weight";
    w3_.value = w13_.narrow(0, f_, f_);
    w3_.grad = dw13_.narrow(0, f_, f_);
    w2_.init(fqn + ".w2.weight", {d_, f_}, nn::parameter_device());
  }

  // What backward needs: the input, the fused gate|up GEMM output and the SwiGLU output.
  struct Saved {
    Tensor x_ND, gu_N2F, h_NF;
  };

  // gu_N2F = x w13^T; h_NF = silu(gu[:, :F]) * gu[:, F:]; y_ND = h w2^T.
  Tensor forward(const Tensor& x_ND, std::any& saved) const override {
    const int64_t n = x_ND.size(0), f2 = 2 * f_;
    Saved& s = saved.emplace<Saved>();
    s.x_ND = x_ND;
    s.gu_N2F = Tensor::empty({n, f2}, DType::f32, x_ND.device());
    s.h_NF = Tensor::empty({n, f_}, DType::f32, x_ND.device());
    Tensor y = Tensor::empty({n, d_}, DType::f32, x_ND.device());
    if (x_ND.is_meta()) return y;  // a meta run (titan plan, the memory floor): what it allocates, no values
    gemm(false, true, n, f2, d_, 1.0f, x_ND.data<float>(), d_, w13_.data<float>(), d_, 0.0f, s.gu_N2F.data<float>(), f2);
    const float* gu = s.gu_N2F.data<float>();
    float* h = s.h_NF.data<float>();
    titan::parallel_for(n, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* g = gu + r * f2;
        const float* u = g + f_;
        for (int64_t j = 0; j < f_; ++j) h[r * f_ + j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
      }
    });
    gemm(false, true, n, d_, f_, 1.0f, h, f_, w2_.value.data<float>(), f_, 0.0f, y.data<float>(), d_);
    return y;
  }

  // dh = dy w2; dW2 += dy^T h; dgu = SwiGLU backward (one pass); dW13 += dgu^T x; dx = dgu w13.
  Tensor backward(const Tensor& dy_ND, std::any& saved) override {
    const Saved& s = std::any_cast<const Saved&>(saved);
    const int64_t n = dy_ND.size(0), f2 = 2 * f_;
    const titan::Device dev = dy_ND.device();
    Tensor dh = Tensor::empty({n, f_}, DType::f32, dev), dgu = Tensor::empty({n, f2}, DType::f32, dev),
           dx = Tensor::empty({n, d_}, DType::f32, dev);
    if (dy_ND.is_meta()) {
      saved.reset();
      return dx;
    }
    const float* dy = dy_ND.data<float>();
    gemm(false, false, n, f_, d_, 1.0f, dy, d_, w2_.value.data<float>(), f_, 0.0f, dh.data<float>(), f_);
    gemm(true, false, d_, f_, n, 1.0f, dy, d_, s.h_NF.data<float>(), f_, 1.0f, w2_.grad.data<float>(), f_);
    const float* gu = s.gu_N2F.data<float>();
    const float* dhp = dh.data<float>();
    float* dgup = dgu.data<float>();
    titan::parallel_for(n, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* g = gu + r * f2;
        const float* u = g + f_;
        float* dg = dgup + r * f2;
        float* du = dg + f_;
        for (int64_t j = 0; j < f_; ++j) {
          const float s = 1.0f / (1.0f + std::exp(-g[j]));
          const float silu = g[j] * s;
          const float dhj = dhp[r * f_ + j];
          dg[j] = dhj * u[j] * s * (1.0f + g[j] * (1.0f - s));
          du[j] = dhj * silu;
        }
      }
    });
    gemm(true, false, f2, d_, n, 1.0f, dgup, f2, s.x_ND.data<float>(), d_, 1.0f, dw13_.data<float>(), d_);
    gemm(false, false, n, d_, f2, 1.0f, dgup, f2, w13_.data<float>(), d_, 0.0f, dx.data<float>(), d_);
    saved.reset();
    return dx;
  }

  void collect(nn::ParameterList& out) override {
    out.push_back(&w1_);
    out.push_back(&w2_);
    out.push_back(&w3_);
  }
  void check(int64_t, int64_t) const override {
    TITAN_CHECK(!has_bias_, "swiglu_w13 does not support feed-forward biases (HF mlp_bias). HINT: drop kernel_lib "
                "from --override.imports for this model");
  }
  std::string describe() const override { return "swiglu_w13 (plugin kernel_lib)"; }

 private:
  int64_t d_, f_;
  bool has_bias_;
  Tensor w13_, dw13_;           // [2F, D]: rows [0, F) gate (w1), [F, 2F) up (w3)
  nn::Parameter w1_, w3_, w2_;  // w1_, w3_ are views of w13_ / dw13_
};

// The recipe's config function: the debug model with this library's kernel imported
// (`titan train --module kernel_lib.so --config kernel_lib_debug`): it names this very file in
// override.imports, found with dladdr, so the one flag both defines the run and attaches the kernel.
titan::config::JobConfig kernel_lib_debug() {
  titan::config::JobConfig c = titan::config::base_config();
  c.job.dump_folder = "./outputs/kernel_lib_debug";
  c.model.name = "debug";
  c.model.hf_assets_path = "./outputs/quickstart_tokenizer";
  c.training.steps = 20;
  c.training.local_batch_size = 4;
  c.training.seq_len = 256;
  c.training.deterministic = true;
  c.optimizer.lr = 3e-3;
  c.lr_scheduler.warmup_steps = 4;
  c.metrics.log_freq = 5;
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&kernel_lib_debug), &self) != 0 && self.dli_fname != nullptr) {
    c.overrides.imports = self.dli_fname;
  }
  return c;
}

}  // namespace

extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION; }

extern "C" void titan_plugin_register(titan::plugins::PluginRegistrar& registrar) {
  registrar.add_config_function("kernel_lib_debug", "the debug model for kernel_lib's fused SwiGLU (20 steps)",
                                &kernel_lib_debug);
  registrar.add_module("SwiGluW13", [](const nn::NodeConfig& node, const nn::ModuleBuild& build) -> std::unique_ptr<nn::Module> {
    return std::make_unique<SwiGluW13>(nn::node_as<SwiGluW13Node>(node, build.path()), build.fqn());
  });
  titan::plugins::Override o;
  o.name = "swiglu_w13";
  o.target_type = "FeedForward";
  o.exact = true;
  o.fqn_patterns = {"model.layers.*.feed_forward"};
  o.description = "fused SwiGLU on a [2F, D] gate|up matrix: one GEMM for gate and up, the activation fused";
  o.factory = [](const nn::NodeConfig& node) -> std::shared_ptr<const nn::NodeConfig> {
    return titan::plugins::derive<SwiGluW13Node>(dynamic_cast<const nn::FeedForwardConfig&>(node));
  };
  registrar.add_override(std::move(o));
}
