// Progress of long non-step work (initializing or loading weights, saving, reading a corpus) on a
// terminal: one stderr line redrawn in place, "[titan] <what> 12/28 layers (43%) 3.1 s", at most
// ten times a second, ended by done() (or the destructor) with the total time. When stderr is not a
// TTY (CI, a log file) nothing is drawn until done(), which logs one line when the work took more
// than a second — so logs stay clean and short work stays silent.
#pragma once

#include <cstdint>
#include <string>

namespace titan {

class Progress {
 public:
  // total <= 0: unknown (then only the count is shown).
  Progress(std::string what, int64_t total, std::string unit);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(int64_t n = 1);  // not thread-safe: call from one thread
  void done();

 private:
  void draw(bool final);

  std::string what_, unit_;
  int64_t total_ = 0, count_ = 0;
  double start_ = 0.0, last_draw_ = 0.0;
  bool tty_ = false, finished_ = false;
};

}  // namespace titan
