#include "titan/core/progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "titan/core/log.h"

namespace titan {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

Progress::Progress(std::string what, int64_t total, std::string unit)
    : what_(std::move(what)), unit_(std::move(unit)), total_(total), start_(now()), tty_(::isatty(2) == 1) {}

Progress::~Progress() { done(); }

void Progress::advance(int64_t n) {
  count_ += n;
  if (!tty_) return;
  const double t = now();
  if (t - last_draw_ >= 0.1) {
    last_draw_ = t;
    draw(false);
  }
}

void Progress::done() {
  if (finished_) return;
  finished_ = true;
  const double seconds = now() - start_;
  if (tty_) {
    draw(true);
  } else if (seconds >= 1.0) {
    char line[64];
    std::snprintf(line, sizeof line, " %.1f s", seconds);
    log_info(what_ + ": " + std::to_string(count_) + " " + unit_ + line);
  }
}

void Progress::draw(bool final) {
  const double seconds = now() - start_;
  char of_total[64] = "";
  if (total_ > 0) {
    std::snprintf(of_total, sizeof of_total, "/%lld", static_cast<long long>(total_));
  }
  char percent[16] = "";
  if (total_ > 0) std::snprintf(percent, sizeof percent, " (%d%%)", static_cast<int>(100 * count_ / total_));
  std::fprintf(stderr, "\r[titan] %s %lld%s %s%s %.1f s%s", what_.c_str(), static_cast<long long>(count_), of_total,
               unit_.c_str(), percent, seconds, final ? "\n" : "\033[K");
  std::fflush(stderr);
}

}  // namespace titan
