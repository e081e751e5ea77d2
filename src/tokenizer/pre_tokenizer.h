// PreTokenizer: cuts a normalized fragment into words; BPE then runs inside each word.
//
// A sequence of split steps; each step re-splits every piece the previous step produced, so
// lookarounds and anchors see only the current piece (as in llama.cpp's unicode_regex_split and
// Hugging Face's Sequence of Split pre-tokenizers). No step: the whole fragment is one word.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex_split.h"

namespace inflight {

class PreTokenizer {
 public:
  // A regex split (HF Split with a Regex pattern; llama.cpp's regexes use kIsolated).
  void add_regex(std::string_view pattern, SplitBehavior behavior = SplitBehavior::kIsolated,
                 bool invert = false);
  // A split on a literal string (HF Split with a String pattern, Metaspace's split on "▁").
  void add_literal(std::string_view literal, SplitBehavior behavior, bool invert = false);

  bool empty() const { return steps_.empty(); }
  size_t num_steps() const { return steps_.size(); }

  // Appends the words of `text` (views into it, non-empty, in order, covering it except for
  // pieces a kRemoved step drops) to `out`.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  struct Step {
    std::unique_ptr<Regex> regex;  // null for a literal split
    std::string literal;
    SplitBehavior behavior;
    bool invert;
  };
  std::vector<Step> steps_;
};

}  // namespace inflight
