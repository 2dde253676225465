// rms_norm_one_pass: a module of its own for every RMSNorm node of the model (the block norms,
// the q/k norms and the final norm: nodes only titan built before the config tree held the
// modules' configs). Same math as the built-in module, another implementation: one pass per row
// that takes the mean square in double and writes y while the row is in cache, and a backward that
// recomputes the row's x * rstd instead of keeping y. What it keeps for backward is its own Saved
// value (x and rstd), held by the caller, so it is micro-batch safe and activation checkpointing
// replays it like any other module. Parameters keep the built-in names (<fqn>.weight).
//   y = x * rstd * w,  rstd = 1 / sqrt(mean(x^2) + eps)
//   dx = rstd * (g - x * rstd^2 * mean(g * x)),  g = dy * w;  dw += sum over rows of dy * x * rstd
// Legend: N rows, D the normalized width.
#include <any>
#include <cmath>
#include <memory>

#include "titan/core/parallel.h"
#include "titan/plugins/plugin_api.h"

namespace {

using titan::Tensor;
namespace nn = titan::nn;

class RmsNormOnePassConfig : public nn::RmsNormConfig {
 public:
  std::vector<std::string> type_chain() const override { return {"RmsNormOnePass", "RmsNorm"}; }
};

class RmsNormOnePass : public nn::RmsNormModule {
 public:
  struct Saved {
    Tensor x;          // the input, any shape ending in D
    Tensor rstd_N;     // f32 [N]
  };

  RmsNormOnePass(const RmsNormOnePassConfig& c, const std::string& fqn) : d_(c.dim), eps_(c.eps) {
    weight_.init(fqn + ".weight", {c.dim}, nn::parameter_device());
    weight_.value.fill_(1.0f);  // no values on meta: a no-op there
  }

  Tensor forward(const Tensor& x, std::any& saved) const override {
    Saved& s = saved.emplace<Saved>();
    const int64_t n = x.numel() / d_;
    s.x = x;
    s.rstd_N = Tensor::empty({n}, titan::DType::f32, x.device());
    Tensor y = Tensor::empty(x.shape(), titan::DType::f32, x.device());
    if (x.is_meta()) return y;  // a meta run (titan plan, the memory floor): what it allocates, no values
    const float* xp = x.data<float>();
    const float* w = weight_.value.data<float>();
    float* yp = y.data<float>();
    float* r = s.rstd_N.data<float>();
    titan::parallel_for(n, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* row = xp + i * d_;
        double ss = 0.0;
        for (int64_t j = 0; j < d_; ++j) ss += static_cast<double>(row[j]) * row[j];
        r[i] = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d_) + eps_));
        for (int64_t j = 0; j < d_; ++j) yp[i * d_ + j] = row[j] * r[i] * w[j];
      }
    });
    return y;
  }

  Tensor backward(const Tensor& dy, std::any& saved) override {
    const Saved& s = std::any_cast<const Saved&>(saved);
    const int64_t n = s.x.numel() / d_;
    Tensor dx = Tensor::empty(s.x.shape(), titan::DType::f32, dy.device());
    if (dy.is_meta()) {
      saved.reset();
      return dx;
    }
    const float* xp = s.x.data<float>();
    const float* dyp = dy.data<float>();
    const float* w = weight_.value.data<float>();
    const float* r = s.rstd_N.data<float>();
    float* dxp = dx.data<float>();
    titan::parallel_for(n, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        double gx = 0.0;  // sum of g * x over the row
        for (int64_t j = 0; j < d_; ++j) gx += static_cast<double>(dyp[i * d_ + j]) * w[j] * xp[i * d_ + j];
        const float c = static_cast<float>(gx / static_cast<double>(d_)) * r[i] * r[i];
        for (int64_t j = 0; j < d_; ++j) dxp[i * d_ + j] = r[i] * (dyp[i * d_ + j] * w[j] - xp[i * d_ + j] * c);
      }
    });
    // dw: a column sum over the rows, one thread (the rows are few per column block at these widths).
    float* dw = weight_.grad.data<float>();
    for (int64_t j = 0; j < d_; ++j) {
      double acc = 0.0;
      for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(dyp[i * d_ + j]) * xp[i * d_ + j] * r[i];
      dw[j] += static_cast<float>(acc);
    }
    saved.reset();
    return dx;
  }

  void collect(nn::ParameterList& out) override { out.push_back(&weight_); }
  std::string describe() const override { return "rms_norm_one_pass (plugin)"; }

 private:
  int64_t d_;
  double eps_;
  nn::Parameter weight_;
};

}  // namespace

extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION; }

extern "C" void titan_plugin_register(titan::plugins::PluginRegistrar& registrar) {
  registrar.add_module("RmsNormOnePass", [](const nn::NodeConfig& node, const nn::ModuleBuild& build)
                                             -> std::unique_ptr<nn::Module> {
    return std::make_unique<RmsNormOnePass>(nn::node_as<RmsNormOnePassConfig>(node, build.path()), build.fqn());
  });
  titan::plugins::Override o;
  o.name = "rms_norm_one_pass";
  o.target_type = "RmsNorm";
  o.exact = true;  // every RMSNorm node, wherever it is (no fqn_patterns)
  o.description = "RMSNorm in one pass per row, mean square in double";
  o.factory = [](const nn::NodeConfig& node) -> std::shared_ptr<const nn::NodeConfig> {
    return titan::plugins::derive<RmsNormOnePassConfig>(dynamic_cast<const nn::RmsNormConfig&>(node));
  };
  registrar.add_override(std::move(o));
}
