#include "grammar/grammar_compiler.h"

#include <optional>
#include <stdexcept>
#include <vector>

#include "core/check.h"
#include "grammar/compiled_grammar_impl.h"
#include "tokenizer/tokenizer.h"

namespace inflight {
namespace {

// Each token's bytes as it appears inside generated text; "" for control and unknown tokens,
// which XGrammar treats as never matching.
std::vector<std::string> token_bytes(const Tokenizer& tokenizer) {
  std::vector<std::string> vocab(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) continue;
    vocab[static_cast<size_t>(id)] = tokenizer.token_piece(id, /*skip_special=*/false);
  }
  return vocab;
}

// A string literal of XGrammar's EBNF.
std::string ebnf_literal(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

std::string choice_grammar(const std::vector<std::string>& choices) {
  std::string root = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) root += " | ";
    root += ebnf_literal(choices[i]);
  }
  return root;
}

std::string cache_key(const GrammarSpec& c) {
  std::string key(grammar_kind_name(c.kind));
  key += '\0';
  key += c.strict ? '1' : '0';
  key += c.text;
  for (const std::string& choice : c.choices) {
    key += '\0';
    key += choice;
  }
  return key;
}

}  // namespace

std::string_view grammar_kind_name(GrammarSpec::Kind kind) {
  switch (kind) {
    case GrammarSpec::Kind::kJsonSchema:
      return "JSON schema";
    case GrammarSpec::Kind::kJsonObject:
      return "JSON object";
    case GrammarSpec::Kind::kRegex:
      return "regex";
    case GrammarSpec::Kind::kChoice:
      return "choice";
    case GrammarSpec::Kind::kEbnf:
      return "grammar";
  }
  return "constraint";
}

CompiledGrammar::CompiledGrammar(std::unique_ptr<CompiledGrammarImpl> impl)
    : impl_(std::move(impl)), vocab_size_(impl_->grammar.GetTokenizerInfo().GetVocabSize()) {}

CompiledGrammar::~CompiledGrammar() = default;

struct GrammarCompiler::Impl {
  xgrammar::GrammarCompiler compiler;
};

GrammarCompiler::GrammarCompiler(const Tokenizer& tokenizer, int64_t vocab_size, int num_threads)
    : vocab_size_(vocab_size) {
  INFLIGHT_CHECK(vocab_size >= tokenizer.vocab_size(),
                 "logits width {} is below the tokenizer's vocabulary {}", vocab_size,
                 tokenizer.vocab_size());
  const std::span<const int32_t> eog = tokenizer.eog_ids();
  xgrammar::TokenizerInfo info(token_bytes(tokenizer), xgrammar::VocabType::RAW,
                               static_cast<int>(vocab_size),
                               std::vector<int32_t>(eog.begin(), eog.end()),
                               /*add_prefix_space=*/false);
  // XGrammar's own cache is off: ours keeps compiled grammars alive while matchers use them.
  impl_ = std::make_unique<Impl>(Impl{xgrammar::GrammarCompiler(
      info, num_threads, /*cache_enabled=*/false, /*max_memory_bytes=*/-1)});
}

GrammarCompiler::~GrammarCompiler() = default;

size_t GrammarCompiler::cache_size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.size();
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile(const GrammarSpec& c) {
  const std::string key = cache_key(c);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
  }
  // Compiled outside the lock: a large schema must not hold up requests for cached ones (two
  // threads compiling the same constraint at once both do the work; the first stored wins).
  std::optional<xgrammar::CompiledGrammar> g;
  xgrammar::GrammarCompiler& x = impl_->compiler;
  try {
    switch (c.kind) {
      case GrammarSpec::Kind::kJsonSchema:
        g = x.CompileJSONSchema(c.text, /*any_whitespace=*/false, std::nullopt, std::nullopt,
                                c.strict);
        break;
      case GrammarSpec::Kind::kJsonObject:
        g = x.CompileJSONSchema(R"({"type": "object"})", /*any_whitespace=*/false, std::nullopt,
                                std::nullopt, /*strict_mode=*/false);
        break;
      case GrammarSpec::Kind::kRegex:
        g = x.CompileRegex(c.text);
        break;
      case GrammarSpec::Kind::kChoice:
        INFLIGHT_CHECK_CODE(!c.choices.empty(), ErrorCode::kInvalidArgument,
                            "a choice constraint needs at least one choice");
        g = x.CompileGrammar(choice_grammar(c.choices), "root");
        break;
      case GrammarSpec::Kind::kEbnf:
        g = x.CompileGrammar(c.text, "root");
        break;
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    INFLIGHT_THROW(ErrorCode::kInvalidArgument, "invalid {}: {}", grammar_kind_name(c.kind),
                   e.what());
  }
  auto compiled = std::make_shared<const CompiledGrammar>(
      std::make_unique<CompiledGrammarImpl>(CompiledGrammarImpl{*g}));
  std::lock_guard<std::mutex> lock(mutex_);
  if (cache_.size() >= kMaxCachedGrammars && !cache_.contains(key)) cache_.erase(cache_.begin());
  return cache_.emplace(key, std::move(compiled)).first->second;
}

}  // namespace inflight
