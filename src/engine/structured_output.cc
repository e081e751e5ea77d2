#include "engine/structured_output.h"

#include <algorithm>
#include <thread>

#include "core/check.h"
#include "tokenizer/tokenizer.h"

namespace inflight {

std::string_view structured_output_kind_name(StructuredOutput::Kind kind) {
  switch (kind) {
    case StructuredOutput::Kind::kJsonSchema:
      return "json_schema";
    case StructuredOutput::Kind::kJsonObject:
      return "json_object";
    case StructuredOutput::Kind::kRegex:
      return "regex";
    case StructuredOutput::Kind::kChoice:
      return "choice";
    case StructuredOutput::Kind::kGrammar:
      return "grammar";
  }
  return "unknown";
}

GrammarSpec grammar_spec(const StructuredOutput& c) {
  GrammarSpec spec;
  switch (c.kind) {
    case StructuredOutput::Kind::kJsonSchema:
      spec.kind = GrammarSpec::Kind::kJsonSchema;
      break;
    case StructuredOutput::Kind::kJsonObject:
      spec.kind = GrammarSpec::Kind::kJsonObject;
      break;
    case StructuredOutput::Kind::kRegex:
      spec.kind = GrammarSpec::Kind::kRegex;
      break;
    case StructuredOutput::Kind::kChoice:
      spec.kind = GrammarSpec::Kind::kChoice;
      break;
    case StructuredOutput::Kind::kGrammar:
      spec.kind = GrammarSpec::Kind::kEbnf;
      break;
  }
  spec.text = c.text;
  spec.choices = c.choices;
  spec.strict = c.strict;
  return spec;
}

StructuredOutputCompiler::StructuredOutputCompiler(std::shared_ptr<const Tokenizer> tokenizer,
                                                   int64_t vocab_size)
    : tokenizer_(std::move(tokenizer)), vocab_size_(vocab_size) {}

Result<std::shared_ptr<const CompiledGrammar>> StructuredOutputCompiler::compile(
    const StructuredOutput& constraint) {
  if (tokenizer_ == nullptr) {
    return Status(StatusCode::kUnsupported,
                  "structured output needs a tokenizer; this engine has none");
  }
  try {
    std::call_once(once_, [&] {
      const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
      compiler_ = std::make_unique<GrammarCompiler>(*tokenizer_, vocab_size_, threads);
    });
    return compiler_->compile(grammar_spec(constraint));
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kInvalidArgument) {
      return Status(StatusCode::kInvalidArgument, e.message());
    }
    throw;
  }
}

}  // namespace inflight
