// Tokenizer: text <-> token ids for every vocabulary the engine loads.
//
//   auto tok = Tokenizer::from_path("model.gguf");   // or tokenizer.json, *.tiktoken, a directory
//   std::vector<int32_t> ids = tok->encode("Hello", /*add_special=*/true, /*parse_special=*/false);
//   std::string text = tok->decode(ids, /*skip_special=*/true);
//
// Supported sources:
//   - GGUF `tokenizer.ggml.model` = "gpt2"  (byte-level BPE; `tokenizer.ggml.pre` picks the
//     pre-tokenizer regexes) and = "llama" (SentencePiece-style BPE with scores and <0xXX> byte
//     fallback), as llama.cpp reads them.
//   - Hugging Face tokenizer.json with a BPE model (normalizers, pre-tokenizers, added tokens,
//     post-processor BOS/EOS, decoders).
//   - tiktoken rank files (cl100k_base, o200k_base, p50k_base, r50k_base: regex and special
//     tokens chosen by file name).
//   - GPT-2 encoder.json + vocab.bpe (a directory holding both).
//
// Thread safety: a Tokenizer is immutable after construction; every const method may be called
// from any number of threads at once.
//
// Text in, text out:
//   - encode() accepts any bytes; invalid UTF-8 is replaced by U+FFFD (one per maximal invalid
//     subsequence) before tokenizing, as llama.cpp does.
//   - decode() always returns valid UTF-8: byte sequences that the ids spell but that are not
//     valid UTF-8 become U+FFFD, using the same rule, so that the streaming IncrementalDetokenizer
//     (detokenizer.h) can produce exactly the same text piece by piece.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inflight {

class GgufFile;
class TokenizerImpl;

// What a token is, beyond its text. Values equal GGUF's `tokenizer.ggml.token_type`.
enum class TokenType : uint8_t {
  kNormal = 1,
  kUnknown = 2,      // <unk>
  kControl = 3,      // BOS/EOS/<|im_start|>...: matched in text only with parse_special
  kUserDefined = 4,  // added tokens that are always matched as a whole, and decode as text
  kUnused = 5,
  kByte = 6,  // SentencePiece <0xXX> byte-fallback tokens
};

// The family of algorithm behind a tokenizer, for logs and for callers that must know.
enum class TokenizerKind : uint8_t {
  kByteLevelBpe,   // GPT-2 style: bytes mapped to printable code points, merges
  kSentencePiece,  // "▁" for spaces, scores or merges, <0xXX> byte fallback
  kTiktoken,       // raw-byte tokens ranked by merge order
};

inline constexpr int32_t kNoToken = -1;

class Tokenizer {
 public:
  // Loads a GGUF file, a tokenizer.json, a .tiktoken file, or a directory holding
  // tokenizer.json / *.tiktoken / encoder.json + vocab.bpe / one .gguf file.
  // Throws Error(kNotFound / kInvalidFile / kUnsupported) naming the file and the key.
  static std::unique_ptr<Tokenizer> from_path(const std::string& path);
  // Builds from the `tokenizer.ggml.*` metadata of an open GGUF file (copies what it needs:
  // the GgufFile may be closed afterwards).
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& gguf);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // text -> ids.
  //   add_special:   add what the tokenizer adds around a sequence (BOS when add_bos(), EOS when
  //                  add_eos(); for tokenizer.json, what its post-processor adds).
  //   parse_special: control tokens written in the text ("<|im_start|>", "<s>") become their
  //                  ids. Without it they are tokenized as ordinary text. User-defined tokens are
  //                  always matched whole.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // ids -> text. skip_special drops control and unknown tokens (BOS, EOS, <|im_end|>...);
  // otherwise their text is written out. A leading space that the tokenizer itself adds
  // (SentencePiece "▁" prefix) is removed from the first token. Ids from vocab_size() on (the
  // padding rows of a model whose vocabulary is larger than its tokenizer's, as Qwen2's 151,936
  // against 151,665) decode as nothing; a negative id throws Error(kInvalidArgument).
  std::string decode(std::span<const int32_t> ids, bool skip_special) const;

  // The raw bytes token `id` contributes in the middle of a decoded sequence (no UTF-8 repair:
  // a byte token gives one byte). With `first`, as the first token that decode() writes (the
  // space the tokenizer prefixed is removed, see strips_leading_space()). Control/unknown
  // tokens give their text unless skip_special. Padding ids and bad ids as in decode().
  std::string token_piece(int32_t id, bool skip_special, bool first = false) const;

  int32_t vocab_size() const;
  TokenizerKind kind() const;
  // Where it was loaded from and which pre-tokenizer, for logs ("gguf:gpt2/smollm" ...).
  const std::string& description() const;

  // Special ids; kNoToken when the vocabulary has none.
  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t pad_id() const;
  int32_t unk_id() const;
  // Whether encode(add_special=true) adds BOS / EOS.
  bool add_bos() const;
  bool add_eos() const;
  // Every id that ends generation: EOS plus end-of-turn tokens (<|eot_id|>, <|im_end|>,
  // <|end|>, <|eom_id|>, <end_of_turn>, <|endoftext|> ...), sorted ascending.
  std::span<const int32_t> eog_ids() const;
  bool is_eog(int32_t id) const;

  // Control or unknown token: skipped by decode(skip_special=true). False for bad ids.
  bool is_special(int32_t id) const;
  TokenType token_type(int32_t id) const;
  // The token as the vocabulary spells it ("Ġthe", "▁the", "<|im_start|>", raw bytes for
  // tiktoken). Throws like decode() for a bad id.
  std::string_view token_text(int32_t id) const;
  // Exact lookup of a vocabulary entry by its spelling (token_text's inverse).
  std::optional<int32_t> find_token(std::string_view text) const;

  // True when decode() removes the space(s) the tokenizer prefixed from the first token it
  // writes (SentencePiece-style vocabularies that prefix text with "▁").
  bool strips_leading_space() const;

  // For the implementation (src/tokenizer/*.cc): takes ownership of a built implementation.
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  const TokenizerImpl& impl() const { return *impl_; }

 private:
  std::unique_ptr<TokenizerImpl> impl_;
};

}  // namespace inflight
