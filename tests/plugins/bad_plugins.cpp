// Deliberately broken plugins for the loader's error tests, one per build (-D picks which):
// TITAN_TEST_BAD_VERSION exports a wrong API version; TITAN_TEST_NO_REGISTER lacks the register function;
// TITAN_TEST_WRONG_ROPE loads fine but computes the wrong thing; TITAN_TEST_WRONG_KERNEL adds a swiglu
// kernel that forgets the up projection.
#include <cmath>

#include "titan/plugins/plugin_api.h"

#ifdef TITAN_TEST_BAD_VERSION
extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION + 100; }
extern "C" void titan_plugin_register(titan::plugins::PluginRegistrar&) {}
#endif
#ifdef TITAN_TEST_NO_REGISTER
extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION; }
#endif
#ifdef TITAN_TEST_WRONG_ROPE
// A RoPE "kernel" that forgets to rotate: check-kernels must catch it.
namespace {
class WrongRopeNode : public titan::nn::RopeConfig {
 public:
  std::vector<std::string> type_chain() const override { return {"WrongRope", "Rope"}; }
};
class WrongRope : public titan::nn::RopeModule {
 public:
  void forward(const titan::nn::StepContext&, titan::Tensor&) override {}
  void backward(const titan::nn::StepContext&, titan::Tensor&) override {}
  std::string describe() const override { return "wrong_rope"; }
};
}  // namespace
extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION; }
extern "C" void titan_plugin_register(titan::plugins::PluginRegistrar& r) {
  r.add_module("WrongRope", [](const titan::nn::NodeConfig&, const titan::nn::ModuleBuild&) {
    return std::unique_ptr<titan::nn::Module>(new WrongRope);
  });
  titan::plugins::Override o;
  o.name = "wrong_rope";
  o.target_type = "Rope";
  o.factory = [](const titan::nn::NodeConfig& n) -> std::shared_ptr<const titan::nn::NodeConfig> {
    return titan::plugins::derive<WrongRopeNode>(dynamic_cast<const titan::nn::RopeConfig&>(n));
  };
  r.add_override(std::move(o));
}
#endif
#ifdef TITAN_TEST_WRONG_KERNEL
namespace {
void silu_only(const titan::Tensor& gate, const titan::Tensor&, titan::Tensor& h) {
  for (int64_t i = 0; i < gate.numel(); ++i) {
    const float g = gate.data<float>()[i];
    h.data<float>()[i] = g / (1.0f + std::exp(-g));
  }
}
}  // namespace
extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION; }
extern "C" void titan_plugin_register(titan::plugins::PluginRegistrar& r) {
  r.add_kernel("swiglu", titan::ops::SwigluImpl{"swiglu_wrong", titan::Device::cpu, nullptr, &silu_only,
                                                titan::ops::swiglu_impl_ref().backward});
}
#endif
