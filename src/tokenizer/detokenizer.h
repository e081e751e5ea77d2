// IncrementalDetokenizer: token ids in one at a time, text out in whole UTF-8 characters.
//
//   IncrementalDetokenizer detok(tokenizer, /*skip_special=*/true);
//   for (int32_t id : generated) send(detok.push(id));
//   send(detok.finish());
//
// Invariant: the concatenation of every push() result and finish() equals
// tokenizer.decode(all ids, skip_special). Each delta is valid UTF-8; bytes of a character that
// is split across tokens (byte-fallback <0xXX> tokens, byte-level pieces of an emoji) are held
// back until the character is complete, and a sequence that can no longer become valid is
// written as U+FFFD at once (the same replacement rule as decode()).
//
// With `context` (for example the prompt), the new tokens are decoded as a continuation of it:
// the leading-space removal that decode() applies to the first token does not apply.
//
// Not thread-safe (one per sequence); the Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace inflight {

class Tokenizer;

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special,
                         std::span<const int32_t> context = {});

  // Adds one token; returns the text that became complete (possibly empty). Throws
  // Error(kInvalidArgument) for an id outside the vocabulary.
  std::string push(int32_t id);
  // Flushes held-back bytes (an incomplete character becomes U+FFFD). Further push() calls
  // continue the same text.
  std::string finish();

  // Everything returned so far, concatenated (for stop-string search by the caller).
  const std::string& text() const { return text_; }
  // Bytes held back because they may begin a character that the next token completes.
  size_t num_pending_bytes() const { return pending_.size(); }
  size_t num_tokens() const { return num_tokens_; }

 private:
  std::string emit(bool final);

  const Tokenizer& tokenizer_;
  bool skip_special_;
  bool first_ = true;    // the next emitted piece is the first of the text
  std::string pending_;  // raw bytes not yet written out
  std::string text_;     // all text written out
  size_t num_tokens_ = 0;
};

}  // namespace inflight
