// rope_tiled: a RoPE kernel of its own, attached to every layer's attention.rope node by an
// override (the seed's NKI rope_hf, on the CPU). Same math as the built-in rope (HF rotate-half),
// another implementation:
//  - a precomputed table [T, 2K] per sequence length: cos(angle) over the full head width first,
//    then sin (cat(freqs, freqs) as HF builds it), angles in double, rounded to f32;
//  - q/k arrive as [B, T, H, K] (titan's layout); the kernel works on [B, H, T, K], so it
//    transposes in, rotates 256-token tiles, and transposes back;
//  - it only takes sequence lengths that are a multiple of 256, which its check() says before
//    step 1: "rope_tiled requires a sequence length that is a multiple of 256, got 300".
// Backward is the rotation by -angle (the transpose): dx1 = dy1 c + dy2 s, dx2 = dy2 c - dy1 s.
// Legend: B batch, T sequence, H heads, K head_dim, K2 = K/2.
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "titan/core/error.h"
#include "titan/plugins/plugin_api.h"

namespace {

using titan::Tensor;
constexpr int64_t kTile = 256;

// The node this plugin puts into the tree: a Rope with a tile size (what the kernel requires).
class RopeTiledConfig : public titan::nn::RopeConfig {
 public:
  int64_t tile = kTile;
  std::vector<std::string> type_chain() const override { return {"RopeTiled", "Rope"}; }
};

// cos|sin table [T, 2K] for positions 0..T-1.
std::vector<float> make_table(double theta, int64_t seq, int64_t k) {
  std::vector<float> table(static_cast<size_t>(seq * 2 * k));
  const int64_t k2 = k / 2;
  for (int64_t t = 0; t < seq; ++t) {
    float* row = table.data() + t * 2 * k;
    for (int64_t i = 0; i < k; ++i) {
      const double inv_freq = 1.0 / std::pow(theta, static_cast<double>(2 * (i % k2)) / static_cast<double>(k));
      const double angle = static_cast<double>(t) * inv_freq;
      row[i] = static_cast<float>(std::cos(angle));
      row[k + i] = static_cast<float>(std::sin(angle));
    }
  }
  return table;
}

// One tile of rows x_TK (contiguous [rows, K]) rotated in place by the table rows it covers;
// sign = +1 forward, -1 backward (the transpose).
void rotate_tile(float* x, const float* table, int64_t rows, int64_t k, float sign) {
  const int64_t k2 = k / 2;
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * k;
    const float* c = table + r * 2 * k;
    const float* s = c + k;
    for (int64_t i = 0; i < k2; ++i) {
      const float x1 = xr[i], x2 = xr[i + k2];
      xr[i] = x1 * c[i] - sign * x2 * s[i];
      xr[i + k2] = x2 * c[i + k2] + sign * x1 * s[i + k2];
    }
  }
}

class RopeTiled : public titan::nn::RopeModule {
 public:
  explicit RopeTiled(const RopeTiledConfig& c) : theta_(c.theta), head_dim_(c.head_dim), tile_(c.tile) {}

  void forward(const titan::nn::StepContext& ctx, Tensor& x) override { apply(ctx, x, 1.0f); }
  void backward(const titan::nn::StepContext& ctx, Tensor& dx) override { apply(ctx, dx, -1.0f); }

  void check_heads(int64_t, int64_t seq, int64_t, int64_t head_dim) const override {
    TITAN_CHECK(seq % tile_ == 0, "rope_tiled requires a sequence length that is a multiple of ", tile_, ", got ",
                seq, ". HINT: set --training.seq_len to a multiple of ", tile_,
                " or drop rope_tiled from --override.imports");
    TITAN_CHECK(head_dim == head_dim_ && head_dim % 2 == 0, "rope_tiled: head_dim ", head_dim,
                " does not match its node's ", head_dim_);
  }
  std::string describe() const override { return "rope_tiled (plugin)"; }

 private:
  const float* table(int64_t seq) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = tables_.find(seq);
    if (it == tables_.end()) it = tables_.emplace(seq, make_table(theta_, seq, head_dim_)).first;
    return it->second.data();
  }

  void apply(const titan::nn::StepContext& ctx, Tensor& x_BTHK, float sign) {
    const int64_t B = x_BTHK.size(0), T = x_BTHK.size(1), H = x_BTHK.size(2), K = x_BTHK.size(3);
    TITAN_CHECK(T == ctx.seq && T % tile_ == 0, "rope_tiled: sequence length ", T, " is not a multiple of ", tile_);
    if (x_BTHK.is_meta()) return;  // a meta run (titan plan, the memory floor): in place, nothing allocated
    const float* tab = table(T);
    float* x = x_BTHK.data<float>();
    std::vector<float> buf(static_cast<size_t>(tile_ * K));  // one [tile, K] slab of [B, H, T, K]
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t t0 = 0; t0 < T; t0 += tile_) {
          for (int64_t t = 0; t < tile_; ++t) {  // [B, T, H, K] -> the tile of [B, H, T, K]
            const float* src = x + ((b * T + t0 + t) * H + h) * K;
            std::copy(src, src + K, buf.data() + t * K);
          }
          rotate_tile(buf.data(), tab + t0 * 2 * K, tile_, K, sign);
          for (int64_t t = 0; t < tile_; ++t) {  // and back
            float* dst = x + ((b * T + t0 + t) * H + h) * K;
            std::copy(buf.data() + t * K, buf.data() + (t + 1) * K, dst);
          }
        }
      }
    }
  }

  double theta_;
  int64_t head_dim_, tile_;
  std::mutex mutex_;
  std::map<int64_t, std::vector<float>> tables_;
};

}  // namespace

extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION; }

extern "C" void titan_plugin_register(titan::plugins::PluginRegistrar& registrar) {
  registrar.add_module("RopeTiled", [](const titan::nn::NodeConfig& node, const titan::nn::ModuleBuild& build)
                                       -> std::unique_ptr<titan::nn::Module> {
    return std::make_unique<RopeTiled>(titan::nn::node_as<RopeTiledConfig>(node, build.path()));
  });
  titan::plugins::Override o;
  o.name = "rope_tiled";
  o.target_type = "Rope";
  o.exact = true;
  o.fqn_patterns = {"model.layers.*.attention.rope"};
  o.description = "RoPE from a precomputed [T, 2K] cos|sin table in 256-token tiles on [B, H, T, K]";
  o.factory = [](const titan::nn::NodeConfig& node) -> std::shared_ptr<const titan::nn::NodeConfig> {
    return titan::plugins::derive<RopeTiledConfig>(dynamic_cast<const titan::nn::RopeConfig&>(node));
  };
  registrar.add_override(std::move(o));
}
