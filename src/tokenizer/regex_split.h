// Pre-tokenizer regexes: PCRE2 with UTF + UCP (Unicode \p{..}, \s, \d) and JIT.
//
// A Regex is compiled once and is then safe to use from many threads: per-thread match data and
// JIT stacks live in thread-local storage.
//
// NOTE: callers must pass valid UTF-8 (matching runs with PCRE2_NO_UTF_CHECK; the tokenizer
// repairs its input once at the entry point instead of on every match).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace inflight {

// How matches and the text between them become pieces (Hugging Face `Split` behaviours).
enum class SplitBehavior {
  kIsolated,            // matches and gaps are separate pieces (llama.cpp's regex split)
  kRemoved,             // matches are dropped
  kMergedWithPrevious,  // a match is glued to the gap before it
  kMergedWithNext,      // a match is glued to the gap after it
  kContiguous,          // adjacent matches are merged into one piece
};

class Regex {
 public:
  // Throws Error(kInvalidFile) naming the pattern and PCRE2's message.
  explicit Regex(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  const std::string& pattern() const { return pattern_; }

  // The [begin, end) byte ranges of the non-empty, non-overlapping matches, left to right.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

// Splits `text` (a piece of a larger string) around the matches of `regex`; appends non-empty
// views into `text` to `out`. `invert` treats the gaps as the matches.
void split_by_regex(const Regex& regex, std::string_view text, SplitBehavior behavior, bool invert,
                    std::vector<std::string_view>& out);

// Same with spans already found: `spans` are the [begin, end) matches within `text`.
void split_by_spans(std::string_view text, const std::vector<std::pair<size_t, size_t>>& spans,
                    SplitBehavior behavior, bool invert, std::vector<std::string_view>& out);

}  // namespace inflight
