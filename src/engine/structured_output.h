// Structured output in the engine: the public StructuredOutput in the grammar layer's terms, and
// the compiler of one engine's vocabulary, made on first use (building XGrammar's view of a
// 100k-token vocabulary takes a noticeable fraction of a second, which engines that never see a
// constraint should not pay).
#pragma once

#include <memory>
#include <mutex>

#include "grammar/grammar_compiler.h"
#include "inflight/sampling_params.h"
#include "inflight/status.h"

namespace inflight {

class Tokenizer;

GrammarSpec grammar_spec(const StructuredOutput& constraint);

class StructuredOutputCompiler {
 public:
  // `tokenizer` may be null (then every constraint is kUnsupported).
  StructuredOutputCompiler(std::shared_ptr<const Tokenizer> tokenizer, int64_t vocab_size);

  // Thread-safe; cached. kInvalidArgument naming the kind of constraint and what is wrong.
  Result<std::shared_ptr<const CompiledGrammar>> compile(const StructuredOutput& constraint);

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  int64_t vocab_size_;
  std::once_flag once_;
  std::unique_ptr<GrammarCompiler> compiler_;
};

}  // namespace inflight
