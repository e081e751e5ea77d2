// StopMatcher: finds stop strings in a choice's output text as it grows, across token
// boundaries, and decides how much of the text may be shown.
//
// Text that might still become the start of a stop string is held back: after "Hello\n" with
// stop "\n\n", the "\n" waits for the next token. On a match the output ends at the stop string
// (or just after it with include_stop_str_in_output); the text after it is dropped.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inflight {

class StopMatcher {
 public:
  StopMatcher(std::vector<std::string> stops, bool include_stop_in_output);

  struct Update {
    std::string text;                    // may be shown now
    std::optional<size_t> matched_stop;  // index into the stop strings when one matched
  };

  // Adds newly decoded text. After a match, further calls return nothing.
  Update append(std::string_view delta);
  // Everything held back (the output ended for another reason).
  std::string flush();

  bool matched() const { return done_; }

 private:
  std::vector<std::string> stops_;
  bool include_stop_;
  std::string pending_;  // not shown yet: a suffix that may begin a stop string
  bool done_ = false;
};

}  // namespace inflight
