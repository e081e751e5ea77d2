// A progress line on stderr: a bar redrawn in place on a terminal; otherwise (a log file) one
// line each time another tenth of the work is done.
#pragma once

#include <cstdint>

namespace inflight::bench {

class ProgressBar {
 public:
  // enabled = false draws nothing.
  ProgressBar(int64_t total, bool enabled);
  // done of total finished after elapsed_s seconds.
  void update(int64_t done, double elapsed_s);
  // Ends the line on a terminal.
  void close();

 private:
  int64_t total_;
  bool enabled_;
  bool tty_;
  int64_t last_tenth_ = 0;
  bool drawn_ = false;
};

}  // namespace inflight::bench
