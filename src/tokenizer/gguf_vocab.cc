#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <cctype>

#include "core/check.h"
#include "core/logging.h"
#include "formats/gguf.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/gguf_pre_tokenizers.h"
#include "tokenizer/spm_model.h"
#include "tokenizer/tokenizer_impl.h"

namespace inflight {

namespace {

TokenType token_type_from_gguf(int64_t v) {
  switch (v) {
    case 1:
      return TokenType::kNormal;
    case 2:
      return TokenType::kUnknown;
    case 3:
      return TokenType::kControl;
    case 4:
      return TokenType::kUserDefined;
    case 6:
      return TokenType::kByte;
    default:
      return TokenType::kUnused;  // unused or undefined: decodes to nothing
  }
}

// A special id from `key` if present and in range, else `fallback` if in range, else none.
int32_t special_id(const GgufFile& gguf, std::string_view key, int32_t fallback, int32_t n) {
  int64_t id = fallback;
  if (gguf.has(key)) {
    const int64_t v = gguf.get_int(key);
    if (v >= 0 && v < n) {
      id = v;
    } else {
      INFLIGHT_LOG_WARN("{}: {} = {} is outside the vocabulary ({} tokens); ignoring it",
                        gguf.what(), key, v, n);
    }
  }
  return (id >= 0 && id < n) ? static_cast<int32_t>(id) : kNoToken;
}

// Returns the pre-tokenizer's default for add_bos_token.
bool build_bpe(const GgufFile& gguf, TokenizerImpl& impl) {
  std::string pre(gguf.get_string_or("tokenizer.ggml.pre", ""));
  if (pre.empty()) {
    INFLIGHT_LOG_WARN(
        "{}: no tokenizer.ggml.pre; using the 'default' pre-tokenizer, which "
        "may not match the model's",
        gguf.what());
    pre = "default";
  }
  const auto preset = gguf_pre_tokenizer(pre);
  INFLIGHT_CHECK_CODE(preset.has_value(), ErrorCode::kUnsupported,
                      "{}: tokenizer.ggml.pre = '{}' is not a pre-tokenizer we implement",
                      gguf.what(), pre);
  for (const std::string& r : preset->regexes) impl.pre_tokenizer.add_regex(r);

  BpeOptions options;
  options.input = BpeOptions::Input::kBytes;
  options.ignore_merges = preset->ignore_merges;
  auto model = std::make_unique<BpeModel>(options);
  for (int32_t id = 0; id < impl.vocab_size(); ++id) {
    // Tokens are spelled in GPT-2's byte-level alphabet; the model works on raw bytes.
    if (auto raw = byte_level::decode(impl.texts[id])) model->add_token(*raw, id);
  }
  TokenIndex by_text;
  for (int32_t id = 0; id < impl.vocab_size(); ++id) by_text.insert(impl.texts[id], id);
  const std::vector<std::string_view> merges = gguf.get_string_array("tokenizer.ggml.merges");
  size_t unusable = 0;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view m = merges[rank];
    const size_t space = m.find(' ', 1);  // the first space after the first character
    const int32_t left = space == m.npos ? -1 : by_text.find(m.substr(0, space));
    const int32_t right = space == m.npos ? -1 : by_text.find(m.substr(space + 1));
    if (left < 0 || right < 0 || !model->add_merge(left, right, static_cast<uint32_t>(rank))) {
      ++unusable;
    }
  }
  if (unusable > 0) {
    INFLIGHT_LOG_WARN("{}: {} of {} tokenizer.ggml.merges entries name or make no token",
                      gguf.what(), unusable, merges.size());
  }
  impl.model = std::move(model);
  impl.kind = TokenizerKind::kByteLevelBpe;
  impl.piece_rule = PieceRule::kByteLevel;
  impl.description = "gguf:gpt2/" + pre;
  return preset->add_bos;
}

void build_spm(const GgufFile& gguf, TokenizerImpl& impl, const std::vector<float>& scores) {
  const bool add_space_prefix = gguf.get_bool_or("tokenizer.ggml.add_space_prefix", true);
  if (add_space_prefix) {
    impl.normalizer.add_space_prefix(" ", PrefixWhen::kAtStartOrAfterSpecial, false);
  }
  impl.normalizer.add_replace(" ", "\xE2\x96\x81");  // ' ' -> '▁'
  impl.first_piece_rule = add_space_prefix ? FirstPieceRule::kStripOneSpace : FirstPieceRule::kKeep;
  impl.model = std::make_unique<SpmModel>(impl.texts, scores, impl.unk);
  impl.kind = TokenizerKind::kSentencePiece;
  impl.piece_rule = PieceRule::kSentencePiece;
  impl.description = "gguf:llama";
}

}  // namespace

std::unique_ptr<TokenizerImpl> load_gguf_tokenizer(const GgufFile& gguf) {
  const std::string model_name(gguf.get_string("tokenizer.ggml.model"));
  INFLIGHT_CHECK_CODE(model_name == "gpt2" || model_name == "llama", ErrorCode::kUnsupported,
                      "{}: tokenizer.ggml.model = '{}' is not supported (supported: 'gpt2', "
                      "'llama')",
                      gguf.what(), model_name);
  auto impl = std::make_unique<TokenizerImpl>();
  const std::vector<std::string_view> tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  const auto n = static_cast<int32_t>(tokens.size());
  INFLIGHT_CHECK_CODE(n > 0, ErrorCode::kInvalidFile, "{}: tokenizer.ggml.tokens is empty",
                      gguf.what());
  impl->texts.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    // llama.cpp renames empty tokens so that they cannot collide.
    impl->texts.emplace_back(tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]"
                                               : std::string(tokens[i]));
  }
  impl->types.assign(n, TokenType::kNormal);
  if (gguf.has("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> types = gguf.get_int_array("tokenizer.ggml.token_type");
    INFLIGHT_CHECK_CODE(types.size() >= tokens.size(), ErrorCode::kInvalidFile,
                        "{}: tokenizer.ggml.token_type has {} entries for {} tokens", gguf.what(),
                        types.size(), tokens.size());
    for (int32_t i = 0; i < n; ++i) impl->types[i] = token_type_from_gguf(types[i]);
  }
  std::vector<float> scores(n, 0.0f);
  if (gguf.has("tokenizer.ggml.scores")) {
    scores = gguf.get_float_array("tokenizer.ggml.scores");
    INFLIGHT_CHECK_CODE(scores.size() >= tokens.size(), ErrorCode::kInvalidFile,
                        "{}: tokenizer.ggml.scores has {} entries for {} tokens", gguf.what(),
                        scores.size(), tokens.size());
    scores.resize(n);
  }

  const bool spm = model_name == "llama";
  impl->bos = special_id(gguf, "tokenizer.ggml.bos_token_id", spm ? 1 : 11, n);
  impl->eos = special_id(gguf, "tokenizer.ggml.eos_token_id", spm ? 2 : 11, n);
  impl->unk = special_id(gguf, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n);
  impl->pad = special_id(gguf, "tokenizer.ggml.padding_token_id", -1, n);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (const int32_t id = special_id(gguf, key, -1, n); id != kNoToken) impl->eog.push_back(id);
  }
  // End-of-turn tokens found by name are control tokens whatever the file says (llama.cpp).
  for (int32_t i = 0; i < n; ++i) {
    const auto names = end_of_generation_names();
    if (std::find(names.begin(), names.end(), impl->texts[i]) != names.end()) {
      impl->types[i] = TokenType::kControl;
    }
  }

  bool add_bos = spm;
  if (spm) {
    build_spm(gguf, *impl, scores);
  } else {
    add_bos = build_bpe(gguf, *impl);
  }
  add_bos = gguf.get_bool_or("tokenizer.ggml.add_bos_token", add_bos);
  const bool add_eos = gguf.get_bool_or("tokenizer.ggml.add_eos_token", false);
  INFLIGHT_CHECK_CODE(!add_bos || impl->bos != kNoToken, ErrorCode::kInvalidFile,
                      "{}: tokenizer.ggml.add_bos_token is true but there is no "
                      "tokenizer.ggml.bos_token_id",
                      gguf.what());
  INFLIGHT_CHECK_CODE(!add_eos || impl->eos != kNoToken, ErrorCode::kInvalidFile,
                      "{}: tokenizer.ggml.add_eos_token is true but there is no "
                      "tokenizer.ggml.eos_token_id",
                      gguf.what());
  if (add_bos) impl->prefix_ids.push_back(impl->bos);
  if (add_eos) impl->suffix_ids.push_back(impl->eos);

  // Special and user-defined tokens, matched whole in the text (llama.cpp's partition).
  std::string name(gguf.get_string_or("general.name", ""));
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  const bool phi3 = name.find("phi-3") != name.npos || name.find("phi3") != name.npos;
  std::vector<SpecialTokens::Entry> entries;
  for (int32_t i = 0; i < n; ++i) {
    const TokenType t = impl->types[i];
    if (t != TokenType::kControl && t != TokenType::kUserDefined && t != TokenType::kUnknown) {
      continue;
    }
    SpecialTokens::Entry e{impl->texts[i], i, t == TokenType::kUserDefined};
    // Phi-3 swallows the whitespace after its special tokens, except these three.
    const std::string& s = impl->texts[i];
    e.rstrip = phi3 && s != "<unk>" && s != "<s>" && s != "<|endoftext|>";
    entries.push_back(std::move(e));
  }
  impl->specials = SpecialTokens(std::move(entries), SpecialTokens::Rule::kLongestTokenFirst);
  impl->finalize();
  return impl;
}

}  // namespace inflight
