#include "grammar/grammar_matcher.h"

#include <dlpack/dlpack.h>

#include "core/check.h"
#include "grammar/compiled_grammar_impl.h"
#include "grammar/token_bitmask.h"

namespace inflight {

struct GrammarMatcher::Impl {
  xgrammar::GrammarMatcher matcher;
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar,
                               std::span<const int32_t> stop_ids)
    : grammar_(std::move(grammar)) {
  INFLIGHT_CHECK(grammar_ != nullptr, "a grammar matcher needs a compiled grammar");
  std::optional<std::vector<int>> stops;
  if (!stop_ids.empty()) stops.emplace(stop_ids.begin(), stop_ids.end());
  impl_ = std::make_unique<Impl>(Impl{xgrammar::GrammarMatcher(grammar_->impl().grammar, stops)});
}

GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;

bool GrammarMatcher::fill_mask(std::span<uint32_t> mask) {
  const int64_t words = token_bitmask_words(grammar_->vocab_size());
  INFLIGHT_CHECK(static_cast<int64_t>(mask.size()) == words,
                 "token bitmask of {} words for a vocabulary of {} ({} words)", mask.size(),
                 grammar_->vocab_size(), words);
  int64_t shape[1] = {words};
  DLTensor t{};
  t.data = mask.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLInt, 32, 1};
  t.shape = shape;
  return impl_->matcher.FillNextTokenBitmask(&t);
}

bool GrammarMatcher::accept(int32_t token) {
  if (token < 0 || token >= grammar_->vocab_size() || impl_->matcher.IsTerminated()) return false;
  return impl_->matcher.AcceptToken(token);
}

bool GrammarMatcher::complete() const {
  return impl_->matcher.IsCompleted();
}

bool GrammarMatcher::terminated() const {
  return impl_->matcher.IsTerminated();
}

}  // namespace inflight
