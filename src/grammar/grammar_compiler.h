// GrammarCompiler: structured-output constraints compiled against one tokenizer's vocabulary.
//
//   GrammarCompiler compiler(tokenizer, model_vocab_size);
//   std::shared_ptr<const CompiledGrammar> g = compiler.compile(spec);  // cached
//   GrammarMatcher m(g, stop_ids);                                          // grammar_matcher.h
//
// Each token's bytes come from the tokenizer (byte-level BPE, SentencePiece with byte
// fallback, tiktoken); control tokens never match text, and ids past the tokenizer's
// vocabulary (a padded LM head) are never allowed. Compilation of a JSON schema over a large
// vocabulary takes milliseconds to seconds: callers compile before a request reaches the engine
// loop. Compiled grammars are cached by (kind, strict, text, choices), at most
// kMaxCachedGrammars of them (beyond, an arbitrary one is dropped; matchers keep theirs alive);
// thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <string_view>
#include <vector>

namespace inflight {

// What a constraint is (the engine's StructuredOutput, in this layer's terms).
struct GrammarSpec {
  enum class Kind {
    kJsonSchema,  // `text`: a JSON Schema
    kJsonObject,  // any JSON object
    kRegex,       // `text`: a regular expression matching the whole output
    kChoice,      // `choices`: exactly one of them
    kEbnf,        // `text`: an EBNF / GBNF grammar whose start rule is `root`
  };
  Kind kind = Kind::kJsonObject;
  std::string text;
  std::vector<std::string> choices;
  bool strict = true;  // kJsonSchema: no properties or items beyond the schema's
};

// "JSON schema", "JSON object", "regex", "choice", "grammar" (for messages).
std::string_view grammar_kind_name(GrammarSpec::Kind kind);

class Tokenizer;
struct CompiledGrammarImpl;

// A constraint compiled for one vocabulary: immutable, shared by every matcher of it.
class CompiledGrammar {
 public:
  explicit CompiledGrammar(std::unique_ptr<CompiledGrammarImpl> impl);
  ~CompiledGrammar();
  const CompiledGrammarImpl& impl() const { return *impl_; }
  int64_t vocab_size() const { return vocab_size_; }

 private:
  std::unique_ptr<CompiledGrammarImpl> impl_;
  int64_t vocab_size_;
};

class GrammarCompiler {
 public:
  static constexpr size_t kMaxCachedGrammars = 512;

  // `vocab_size`: the model's logits width (>= the tokenizer's vocabulary). `num_threads`:
  // threads one compilation may use.
  GrammarCompiler(const Tokenizer& tokenizer, int64_t vocab_size, int num_threads = 2);
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // Throws Error(kInvalidArgument) saying what is wrong with the schema, regex or grammar.
  std::shared_ptr<const CompiledGrammar> compile(const GrammarSpec& spec);

  int64_t vocab_size() const { return vocab_size_; }
  // Distinct constraints compiled so far.
  size_t cache_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t vocab_size_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const CompiledGrammar>> cache_;
};

}  // namespace inflight
