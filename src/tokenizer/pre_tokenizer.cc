#include "tokenizer/pre_tokenizer.h"

#include "core/check.h"

namespace inflight {

void PreTokenizer::add_regex(std::string_view pattern, SplitBehavior behavior, bool invert) {
  steps_.push_back({std::make_unique<Regex>(pattern), {}, behavior, invert});
}

void PreTokenizer::add_literal(std::string_view literal, SplitBehavior behavior, bool invert) {
  INFLIGHT_CHECK_CODE(!literal.empty(), ErrorCode::kInvalidFile,
                      "pre-tokenizer Split has an empty string pattern");
  steps_.push_back({nullptr, std::string(literal), behavior, invert});
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return;
  if (steps_.empty()) {
    out.push_back(text);
    return;
  }
  std::vector<std::string_view> cur{text};
  std::vector<std::string_view> next;
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& step = steps_[s];
    std::vector<std::string_view>& dst = s + 1 == steps_.size() ? out : next;
    for (std::string_view piece : cur) {
      if (step.regex) {
        split_by_regex(*step.regex, piece, step.behavior, step.invert, dst);
        continue;
      }
      spans.clear();
      for (size_t pos = piece.find(step.literal); pos != std::string_view::npos;
           pos = piece.find(step.literal, pos + step.literal.size())) {
        spans.emplace_back(pos, pos + step.literal.size());
      }
      split_by_spans(piece, spans, step.behavior, step.invert, dst);
    }
    if (s + 1 < steps_.size()) {
      cur.swap(next);
      next.clear();
    }
  }
}

}  // namespace inflight
