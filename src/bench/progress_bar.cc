#include "bench/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace inflight::bench {

constexpr int kBarWidth = 40;

ProgressBar::ProgressBar(int64_t total, bool enabled)
    : total_(std::max<int64_t>(total, 1)), enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1) {}

void ProgressBar::update(int64_t done, double elapsed_s) {
  if (!enabled_) return;
  const double rate = elapsed_s > 0.0 ? static_cast<double>(done) / elapsed_s : 0.0;
  if (tty_) {
    const auto filled = static_cast<int>(kBarWidth * std::min<int64_t>(done, total_) / total_);
    std::string bar(filled, '#');
    bar.resize(kBarWidth, '.');
    std::fprintf(stderr, "\r[%s] %lld/%lld  %.1fs  %.2f req/s ", bar.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_), elapsed_s, rate);
    std::fflush(stderr);
    drawn_ = true;
    return;
  }
  const int64_t tenth = done * 10 / total_;
  if (tenth > last_tenth_) {
    last_tenth_ = tenth;
    std::fprintf(stderr, "progress: %lld/%lld requests, %.1fs, %.2f req/s\n",
                 static_cast<long long>(done), static_cast<long long>(total_), elapsed_s, rate);
  }
}

void ProgressBar::close() {
  if (enabled_ && tty_ && drawn_) std::fputc('\n', stderr);
  drawn_ = false;
}

}  // namespace inflight::bench
