#include "titan/train/loss_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "titan/checkpoint/atomic_file.h"
#include "titan/core/error.h"

namespace titan::train {
namespace {

// Tick spacing from the 1-2-5 series giving about `target` intervals over `span`.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double nice = f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0;
  return nice * mag;
}

struct Axis {
  double lo, hi, step;  // lo/hi are multiples of step enclosing the data
};

Axis nice_axis(double lo, double hi, int target, bool integer) {
  if (!(hi > lo)) {  // one value: open a window around it
    const double pad = std::max(std::abs(lo) * 0.1, integer ? 1.0 : 1e-3);
    lo -= pad;
    hi += pad;
  }
  double step = nice_step(hi - lo, target);
  if (integer) step = std::max(step, 1.0);
  return {std::floor(lo / step) * step, std::ceil(hi / step) * step, step};
}

// Tick label with as many decimals as the step needs (0.05 -> 2, 500 -> 0); large integer steps
// read better compact: 20000 -> "20k".
std::string tick_label(double v, double step) {
  char buf[64];
  if (std::abs(v) < step * 1e-9) return "0";  // no "-0", no "0k"
  if (step >= 1000 && std::fmod(v, 1000.0) == 0.0 && step == std::floor(step)) {
    if (step >= 1e6 && std::fmod(v, 1e6) == 0.0) {
      std::snprintf(buf, sizeof buf, "%.0fM", v / 1e6);
    } else {
      std::snprintf(buf, sizeof buf, "%.0fk", v / 1e3);
    }
    return buf;
  }
  const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string fmt(const char* format, double a, double b = 0.0, double c = 0.0, double d = 0.0) {
  char buf[128];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

}  // namespace

namespace {

// The plot area in pixels and the axes it maps.
struct Frame {
  double w, h, left, top, pw, ph;
  Axis ax, ay;
  double px(double x) const { return left + (x - ax.lo) / (ax.hi - ax.lo) * pw; }
  double py(double y) const { return top + (ay.hi - y) / (ay.hi - ay.lo) * ph; }
};

// Debiased EMA over `ys` (empty when smoothing is off or there is a single point).
std::vector<double> debiased_ema(const std::vector<double>& ys, double ema) {
  std::vector<double> smooth;
  if (ema <= 0.0 || ys.size() < 2) return smooth;
  double acc = 0.0, weight = 0.0;
  for (const double y : ys) {
    acc = ema * acc + (1.0 - ema) * y;
    weight = ema * weight + (1.0 - ema);
    smooth.push_back(acc / weight);
  }
  return smooth;
}

// Header, title, grid lines with tick labels (the index loop avoids drifting float
// accumulation), the frame and the axis labels.
std::string svg_axes(const Frame& f, const std::string& title) {
  std::string s;
  s += fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
           "viewBox=\"0 0 %.0f %.0f\">\n", f.w, f.h, f.w, f.h);
  s += "<style>text{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;fill:#333}"
       ".tick{font-size:12px}.label{font-size:13px}.title{font-size:16px;font-weight:600}"
       ".grid{stroke:#e6e6e6;stroke-width:1}.axis{stroke:#555;stroke-width:1}</style>\n";
  s += fmt("<rect width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", f.w, f.h);
  s += "<text class=\"title\" x=\"" + fmt("%.1f", f.left + f.pw / 2) +
       "\" y=\"26\" text-anchor=\"middle\">" + xml_escape(title) + "</text>\n";
  const double left = f.left, top = f.top, pw = f.pw, ph = f.ph;
  const int nx = static_cast<int>(std::lround((f.ax.hi - f.ax.lo) / f.ax.step));
  const int ny = static_cast<int>(std::lround((f.ay.hi - f.ay.lo) / f.ay.step));
  for (int i = 0; i <= nx; ++i) {
    const double v = f.ax.lo + i * f.ax.step, x = f.px(v);
    s += fmt("<line class=\"grid\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x, top, x,
             top + ph);
    s += fmt("<line class=\"axis\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x,
             top + ph, x, top + ph + 5);
    s += fmt("<text class=\"tick\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">", x,
             top + ph + 19) + tick_label(v, f.ax.step) + "</text>\n";
  }
  for (int i = 0; i <= ny; ++i) {
    const double v = f.ay.lo + i * f.ay.step, y = f.py(v);
    s += fmt("<line class=\"grid\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", left, y,
             left + pw, y);
    s += fmt("<line class=\"axis\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", left - 5,
             y, left, y);
    s += fmt("<text class=\"tick\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\">", left - 8, y + 4) +
         tick_label(v, f.ay.step) + "</text>\n";
  }
  s += fmt("<rect class=\"axis\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
           "fill=\"none\"/>\n", left, top, pw, ph);
  s += fmt("<text class=\"label\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">step</text>\n",
           left + pw / 2, f.h - 12);
  s += fmt("<text class=\"label\" transform=\"translate(%.2f %.2f) rotate(-90)\" "
           "text-anchor=\"middle\">loss</text>\n", 20.0, top + ph / 2);
  return s;
}

// "x,y x,y ..." of the points in pixels.
std::string svg_points(const Frame& f, const std::vector<double>& xs, const std::vector<double>& ys) {
  std::string p;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) p.push_back(' ');
    p += fmt("%.2f,%.2f", f.px(xs[i]), f.py(ys[i]));
  }
  return p;
}

constexpr const char* kSecondColor = "#ff7f0e";

// The raw curve, or (with smoothing) the raw one faded under the smoothed one; then the second
// series with a marker per point; a legend when there is more than one line.
std::string svg_curves(const Frame& f, const std::vector<double>& xs, const std::vector<double>& ys,
                       const std::vector<double>& smooth, double ema, const std::vector<double>& xs2,
                       const std::vector<double>& ys2, const std::string& label2) {
  auto polyline = [&](const char* cls, const std::vector<double>& px, const std::vector<double>& vals,
                      const char* style) {
    return std::string("<polyline class=\"") + cls + "\" fill=\"none\" " + style +
           " stroke-linejoin=\"round\" stroke-linecap=\"round\" points=\"" + svg_points(f, px, vals) + "\"/>\n";
  };
  if (xs.empty() && xs2.empty()) {
    return fmt("<text class=\"label\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">"
               "no finite loss values</text>\n", f.left + f.pw / 2, f.top + f.ph / 2);
  }
  struct Entry {
    std::string style, text;
  };
  std::vector<Entry> legend;
  std::string s;
  if (!xs.empty() && smooth.empty()) {
    s += polyline("raw", xs, ys, "stroke=\"#1f77b4\" stroke-width=\"1.8\"");
    legend.push_back({"stroke=\"#1f77b4\" stroke-width=\"1.8\"", "train"});
  } else if (!xs.empty()) {
    s += polyline("raw", xs, ys, "stroke=\"#1f77b4\" stroke-opacity=\"0.3\" stroke-width=\"1.2\"");
    s += polyline("smooth", xs, smooth, "stroke=\"#1f77b4\" stroke-width=\"2.2\"");
    legend.push_back({"stroke=\"#1f77b4\" stroke-opacity=\"0.3\" stroke-width=\"1.2\"", "raw"});
    legend.push_back({"stroke=\"#1f77b4\" stroke-width=\"2.2\"", "EMA " + fmt("%.2f", ema)});
  }
  if (!xs2.empty()) {
    const std::string style = std::string("stroke=\"") + kSecondColor + "\" stroke-width=\"2\"";
    s += polyline("validation", xs2, ys2, style.c_str());
    for (size_t i = 0; i < xs2.size(); ++i) {
      s += fmt("<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" ", f.px(xs2[i]), f.py(ys2[i])) + "fill=\"" + kSecondColor +
           "\"/>\n";
    }
    legend.push_back({style, label2});
  }
  if (legend.size() < 2) return s;
  const double lx = f.left + f.pw - 150, ly = f.top + 12;
  s += fmt("<rect x=\"%.2f\" y=\"%.2f\" width=\"140\" height=\"%.0f\" fill=\"#ffffff\" "
           "fill-opacity=\"0.85\" stroke=\"#ddd\"/>\n", lx, ly, 10.0 + 16.0 * static_cast<double>(legend.size()));
  for (size_t i = 0; i < legend.size(); ++i) {
    const double y = ly + 14 + 16.0 * static_cast<double>(i);
    s += fmt("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" ", lx + 10, y, lx + 34, y) + legend[i].style +
         "/>\n";
    s += fmt("<text class=\"tick\" x=\"%.2f\" y=\"%.2f\">", lx + 42, y + 4) + xml_escape(legend[i].text) +
         "</text>\n";
  }
  return s;
}

// The finite points of a series, as doubles.
void finite_points(const std::vector<int64_t>& steps, const std::vector<double>& losses, std::vector<double>& xs,
                   std::vector<double>& ys) {
  for (size_t i = 0; i < losses.size(); ++i) {
    if (!std::isfinite(losses[i])) continue;
    xs.push_back(static_cast<double>(steps[i]));
    ys.push_back(losses[i]);
  }
}

}  // namespace

std::string loss_plot_svg(const std::vector<int64_t>& steps, const std::vector<double>& losses,
                          const std::string& title, const LossPlotOptions& options, const LossSeries& second) {
  TITAN_CHECK(steps.size() == losses.size(), "[loss_plot] ", steps.size(), " steps but ",
              losses.size(), " losses. HINT: pass one step per loss value");
  TITAN_CHECK(second.steps.size() == second.losses.size(), "[loss_plot] series '", second.label, "': ",
              second.steps.size(), " steps but ", second.losses.size(), " losses. HINT: pass one step per loss value");
  TITAN_CHECK(options.width >= 200 && options.height >= 150, "[loss_plot] size ", options.width,
              "x", options.height, " is too small. HINT: use at least 200x150");
  TITAN_CHECK(options.ema >= 0.0 && options.ema < 1.0, "[loss_plot] ema = ", options.ema,
              " is outside [0, 1). HINT: 0 turns smoothing off, 0.9 is TensorBoard-like");
  std::vector<double> xs, ys, xs2, ys2;  // finite points only
  finite_points(steps, losses, xs, ys);
  finite_points(second.steps, second.losses, xs2, ys2);
  std::vector<double> all_x = xs, all_y = ys;
  all_x.insert(all_x.end(), xs2.begin(), xs2.end());
  all_y.insert(all_y.end(), ys2.begin(), ys2.end());
  const double w = options.width, h = options.height;
  const double left = 72, right = 24, top = 44, bottom = 56;
  Frame f{w, h, left, top, w - left - right, h - top - bottom, Axis{0, 1, 0.2}, Axis{0, 1, 0.2}};
  if (!all_x.empty()) {
    f.ax = nice_axis(*std::min_element(all_x.begin(), all_x.end()), *std::max_element(all_x.begin(), all_x.end()), 8,
                     true);
    f.ay = nice_axis(*std::min_element(all_y.begin(), all_y.end()), *std::max_element(all_y.begin(), all_y.end()), 6,
                     false);
  }
  return svg_axes(f, title) +
         svg_curves(f, xs, ys, debiased_ema(ys, options.ema), options.ema, xs2, ys2, second.label) + "</svg>\n";
}

void write_loss_plot_svg(const std::string& path, const std::vector<int64_t>& steps,
                         const std::vector<double>& losses, const std::string& title,
                         const LossPlotOptions& options, const LossSeries& second) {
  ckpt::write_text_file_atomic(path, loss_plot_svg(steps, losses, title, options, second));
}

}  // namespace titan::train
