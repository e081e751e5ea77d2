// SpecialTokens: finds special and added tokens written in the input text and cuts the text
// into fragments (plain text | one token) before normalization and BPE.
//
// Two matching rules, because the two reference implementations differ:
//   kLongestTokenFirst  llama.cpp: tokens sorted by length (longest first); each token in turn
//                       splits every remaining text fragment at each occurrence.
//   kLeftmostLongest    Hugging Face / tiktoken: scan left to right; at each position take the
//                       longest token that starts there.
// A token with `always` set is matched even without parse_special (user-defined / non-special
// added tokens); the others only with parse_special. lstrip / rstrip make the token swallow the
// whitespace on that side.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace inflight {

struct Fragment {
  int32_t token;  // -1 for text
  size_t begin;   // text: byte range in the input
  size_t end;
};

class SpecialTokens {
 public:
  enum class Rule { kLongestTokenFirst, kLeftmostLongest };
  struct Entry {
    std::string text;
    int32_t id;
    bool always;  // matched without parse_special
    bool lstrip = false;
    bool rstrip = false;
  };

  SpecialTokens() = default;
  SpecialTokens(std::vector<Entry> entries, Rule rule);

  bool empty() const { return entries_.empty(); }
  const std::vector<Entry>& entries() const { return entries_; }

  // Cuts `text` into fragments in order. Text fragments are never empty.
  void split(std::string_view text, bool parse_special, std::vector<Fragment>& out) const;

 private:
  void split_longest_first(std::string_view text, bool parse_special,
                           std::vector<Fragment>& out) const;
  void split_leftmost_longest(std::string_view text, bool parse_special,
                              std::vector<Fragment>& out) const;

  std::vector<Entry> entries_;  // kLongestTokenFirst: by length, longest first
  Rule rule_ = Rule::kLeftmostLongest;
  // kLeftmostLongest: entries_ indices by first byte, longest first.
  std::vector<std::vector<uint32_t>> by_first_byte_;
};

}  // namespace inflight
