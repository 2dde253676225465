// test_keep_output: a plugin module that keeps one tensor more than the built-in it replaces, for
// titan plan's check that the meta device counts what a module allocates (a formula over the
// built-in modules would not see it). Every RMSNorm node becomes the built-in RMSNorm that also
// keeps a copy of its output until its backward (as a module caching for a fused backward would):
// the same losses, [N, D] f32 more per norm and micro-batch held for backward.
#include <any>
#include <memory>

#include "titan/nn/rms_norm.h"
#include "titan/plugins/plugin_api.h"

namespace {

namespace nn = titan::nn;

class KeepOutputConfig : public nn::RmsNormConfig {
 public:
  std::vector<std::string> type_chain() const override { return {"RmsNormKeepOutput", "RmsNorm"}; }
};

class RmsNormKeepOutput : public nn::RmsNorm {
 public:
  struct Saved {
    std::any inner;  // the built-in's
    titan::Tensor y;  // the extra tensor: a copy of the output
  };
  using nn::RmsNorm::RmsNorm;

  titan::Tensor forward(const titan::Tensor& x, std::any& saved) const override {
    Saved& s = saved.emplace<Saved>();
    titan::Tensor y = nn::RmsNorm::forward(x, s.inner);
    s.y = y.clone();
    return y;
  }
  titan::Tensor backward(const titan::Tensor& dy, std::any& saved) override {
    Saved& s = std::any_cast<Saved&>(saved);
    titan::Tensor dx = nn::RmsNorm::backward(dy, s.inner);
    saved.reset();
    return dx;
  }
  std::string describe() const override { return "rms_norm_keep_output (test plugin)"; }
};

}  // namespace

extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION; }

extern "C" void titan_plugin_register(titan::plugins::PluginRegistrar& registrar) {
  registrar.add_module("RmsNormKeepOutput", [](const nn::NodeConfig& node, const nn::ModuleBuild& build)
                                                -> std::unique_ptr<nn::Module> {
    return std::make_unique<RmsNormKeepOutput>(nn::node_as<KeepOutputConfig>(node, build.path()), build.fqn());
  });
  titan::plugins::Override o;
  o.name = "rms_norm_keep_output";
  o.target_type = "RmsNorm";
  o.exact = true;
  o.description = "the built-in RMSNorm, keeping a copy of its output until backward";
  o.factory = [](const nn::NodeConfig& node) -> std::shared_ptr<const nn::NodeConfig> {
    return titan::plugins::derive<KeepOutputConfig>(dynamic_cast<const nn::RmsNormConfig&>(node));
  };
  registrar.add_override(std::move(o));
}
