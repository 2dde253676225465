// my_rope: RoPE (HF rotate-half) as a plain loop, attached to every layer's attention.rope node. The
// README's "Writing a kernel plugin" walks through building and using it; tests/integration builds it too.
#include <cmath>
#include <memory>

#include "titan/core/error.h"
#include "titan/plugins/plugin_api.h"

namespace {
using namespace titan;

// 1. The node the override puts into the tree: a Rope with a new type name.
struct MyRopeNode : nn::RopeConfig {
  std::vector<std::string> type_chain() const override { return {"MyRope", "Rope"}; }
};

// 2. The module: forward rotates q/k [B, T, H, K] in place, backward rotates the gradient back.
class MyRope : public nn::RopeModule {
 public:
  explicit MyRope(const nn::RopeConfig& c) : theta_(c.theta) {}
  void forward(const nn::StepContext& ctx, Tensor& x) override { rotate(ctx, x, +1.0); }
  void backward(const nn::StepContext& ctx, Tensor& dx) override { rotate(ctx, dx, -1.0); }
  // 3. The shape constraint, checked before step 1.
  void check_heads(int64_t, int64_t seq, int64_t, int64_t) const override {
    TITAN_CHECK(seq % 64 == 0, "my_rope requires a sequence length that is a multiple of 64, got ", seq);
  }
  std::string describe() const override { return "my_rope"; }

 private:
  void rotate(const nn::StepContext& ctx, Tensor& x, double sign) const {
    const int64_t B = x.size(0), T = x.size(1), H = x.size(2), K = x.size(3);
    if (x.is_meta()) return;  // titan plan's meta run: shapes only, nothing to rotate
    const int64_t* pos = ctx.positions_N.data<int64_t>();
    float* p = x.data<float>();
    for (int64_t n = 0; n < B * T; ++n) {
      for (int64_t i = 0; i < K / 2; ++i) {
        const double angle = static_cast<double>(pos[n]) / std::pow(theta_, 2.0 * i / K);
        const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(sign * std::sin(angle));
        for (int64_t h = 0; h < H; ++h) {
          float* v = p + (n * H + h) * K;
          const float x1 = v[i], x2 = v[i + K / 2];
          v[i] = x1 * c - x2 * s;
          v[i + K / 2] = x2 * c + x1 * s;
        }
      }
    }
  }
  double theta_;
};
}  // namespace

// 4. The two symbols titan looks for.
extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION; }
extern "C" void titan_plugin_register(plugins::PluginRegistrar& r) {
  r.add_module("MyRope", [](const nn::NodeConfig& node, const nn::ModuleBuild& build) {
    return std::unique_ptr<nn::Module>(new MyRope(nn::node_as<nn::RopeConfig>(node, build.path())));
  });
  plugins::Override o;
  o.name = "my_rope";
  o.target_type = "Rope";
  o.fqn_patterns = {"model.layers.*.attention.rope"};
  o.factory = [](const nn::NodeConfig& node) -> std::shared_ptr<const nn::NodeConfig> {
    return plugins::derive<MyRopeNode>(dynamic_cast<const nn::RopeConfig&>(node));
  };
  r.add_override(std::move(o));
}
