// Metrics as JSON Lines: one object per line, e.g. {"step":1,"loss":7.6,"lr":0.0003}.
// Numbers are written so they parse back to the same double (shortest round-trip form);
// NaN and +-inf become null, since JSON has no spelling for them.
// Each line goes to the file in one write(2) as it is written, so a killed process leaves only
// whole lines; flush() fsyncs for machine crashes.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace titan::train {

class JsonlWriter {
 public:
  // append = false starts a new file (truncating an old one); append = true continues it (resume).
  explicit JsonlWriter(const std::string& path, bool append = false);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;

  // `row` must be a JSON object: write({{"step", 1}, {"loss", 7.6}}). Keys keep the order given
  // (ordered_json), so "step" leads each line; a plain nlohmann::json converts implicitly.
  void write(const nlohmann::ordered_json& row);
  void flush();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace titan::train
