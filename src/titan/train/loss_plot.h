// A self-contained SVG line chart of the training loss: axes with 1-2-5 ticks, grid, labels
// "step" / "loss", a title, the raw curve (one <polyline class="raw">) and, over it, an
// exponential moving average (<polyline class="smooth">, debiased as TensorBoard's smoothing
// is). An optional second series (the validation loss) is drawn over both as
// <polyline class="validation"> with a marker per point, and named in the legend with its label.
// Non-finite losses are skipped. The file is written atomically (tmp + rename), so a reader
// never sees half a plot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan::train {

struct LossPlotOptions {
  int width = 800;   // px
  int height = 450;  // px
  double ema = 0.9;  // smoothing weight in [0, 1); 0 draws no smoothed curve
};

// A second series: its legend label and its points (empty: none drawn).
struct LossSeries {
  std::string label;
  std::vector<int64_t> steps;
  std::vector<double> losses;
};

void write_loss_plot_svg(const std::string& path, const std::vector<int64_t>& steps,
                         const std::vector<double>& losses, const std::string& title,
                         const LossPlotOptions& options = {}, const LossSeries& second = {});

// The SVG text itself (what write_loss_plot_svg writes).
std::string loss_plot_svg(const std::vector<int64_t>& steps, const std::vector<double>& losses,
                          const std::string& title, const LossPlotOptions& options = {},
                          const LossSeries& second = {});

}  // namespace titan::train
