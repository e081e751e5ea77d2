// GrammarMatcher: one sequence's position in a compiled constraint.
//
// Per step: fill_mask() writes the tokens allowed next (token_bitmask.h); once the sampler
// picked one, accept() advances. Stop tokens are allowed only where the constraint is complete;
// accepting one terminates the matcher. Not thread-safe; distinct matchers may be used from
// distinct threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "grammar/grammar_compiler.h"

namespace inflight {

class GrammarMatcher {
 public:
  // `stop_ids`: the tokens that end generation (EOS, stop_token_ids).
  GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::span<const int32_t> stop_ids);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;

  // `mask` [token_bitmask_words(vocab)]. Returns false when every token is allowed (the mask is
  // then all ones and need not be applied).
  bool fill_mask(std::span<uint32_t> mask);
  // False when the constraint does not allow `token` here (the matcher is unchanged).
  bool accept(int32_t token);
  // The text so far is a whole match: a stop token may come next.
  bool complete() const;
  // A stop token was accepted: nothing more may come.
  bool terminated() const;
  int64_t vocab_size() const { return grammar_->vocab_size(); }

 private:
  struct Impl;
  std::shared_ptr<const CompiledGrammar> grammar_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inflight
