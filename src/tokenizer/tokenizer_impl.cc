#include "tokenizer/tokenizer_impl.h"

#include <algorithm>

#include "core/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace inflight {

namespace {

std::string sentencepiece_piece(std::string_view text, TokenType type) {
  if (type == TokenType::kByte && text.size() == 6 && text.substr(0, 3) == "<0x") {
    return std::string(1,
                       static_cast<char>(std::stoi(std::string(text.substr(3, 2)), nullptr, 16)));
  }
  std::string out;
  out.reserve(text.size());
  constexpr std::string_view kSpace = "\xE2\x96\x81";  // ▁
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(kSpace, pos);
    out.append(text.substr(pos, hit == std::string_view::npos ? text.npos : hit - pos));
    if (hit == std::string_view::npos) break;
    out.push_back(' ');
    pos = hit + kSpace.size();
  }
  return out;
}

}  // namespace

std::span<const std::string_view> end_of_generation_names() {
  // Tokens that end a turn or a document in the vocabularies we load: the names llama.cpp uses
  // to find end-of-generation tokens that the file does not list.
  static constexpr std::string_view kNames[] = {
      "<|eot_id|>",
      "<|im_end|>",
      "<|end|>",
      "<end_of_turn>",
      "<|endoftext|>",
      "<|eom_id|>",
      "<EOT>",
      "_<EOT>",
      "<|end_of_text|>",
      "<end_of_utterance>",
      "<|return|>",
      "<|call|>",
      "<\xEF\xBD\x9C"
      "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};  // DeepSeek
  return kNames;
}

void TokenizerImpl::check_id(int32_t id) const {
  INFLIGHT_CHECK_CODE(valid(id), ErrorCode::kInvalidArgument,
                      "token id {} is outside the vocabulary [0, {})", id, vocab_size());
}

void TokenizerImpl::finalize() {
  INFLIGHT_CHECK_CODE(!texts.empty(), ErrorCode::kInvalidFile, "{}: the vocabulary is empty",
                      description);
  INFLIGHT_CHECK_CODE(types.size() == texts.size(), ErrorCode::kInvalidFile,
                      "{}: {} tokens but {} token types", description, texts.size(), types.size());
  INFLIGHT_CHECK(model != nullptr, "{}: no tokenization model was built", description);
  auto check_special = [&](int32_t id, const char* what) {
    INFLIGHT_CHECK_CODE(id == kNoToken || valid(id), ErrorCode::kInvalidFile,
                        "{}: {} id {} is outside the vocabulary [0, {})", description, what, id,
                        vocab_size());
  };
  check_special(bos, "BOS");
  check_special(eos, "EOS");
  check_special(pad, "padding");
  check_special(unk, "unknown-token");
  for (int32_t id : prefix_ids) check_special(id, "post-processor");
  for (int32_t id : suffix_ids) check_special(id, "post-processor");
  add_bos =
      bos != kNoToken && std::find(prefix_ids.begin(), prefix_ids.end(), bos) != prefix_ids.end();
  add_eos =
      eos != kNoToken && std::find(suffix_ids.begin(), suffix_ids.end(), eos) != suffix_ids.end();

  pieces.resize(texts.size());
  for (int32_t id = 0; id < vocab_size(); ++id) {
    if (!texts[id].empty()) text_index.insert(texts[id], id);
    const std::string& t = texts[id];
    switch (types[id]) {
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUserDefined:
        pieces[id] = t;  // written as spelled (HF added tokens, llama.cpp user-defined)
        break;
      case TokenType::kUnused:
        break;  // decodes to nothing, as in llama.cpp
      case TokenType::kNormal:
      case TokenType::kByte:
        switch (piece_rule) {
          case PieceRule::kByteLevel: {
            auto raw = byte_level::decode(t);
            pieces[id] = raw ? std::move(*raw) : t;
            break;
          }
          case PieceRule::kSentencePiece:
            pieces[id] = sentencepiece_piece(t, types[id]);
            break;
          case PieceRule::kRaw:
            pieces[id] = t;
            break;
        }
        break;
    }
  }

  if (eos != kNoToken) eog.push_back(eos);
  for (std::string_view name : end_of_generation_names()) {
    const int32_t id = text_index.find(name);
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  for (int32_t id : eog) check_special(id, "end-of-generation");
}

std::string_view TokenizerImpl::piece(int32_t id, bool first, std::string& storage) const {
  std::string_view p = pieces[id];
  if (!first || p.empty()) return p;
  switch (first_piece_rule) {
    case FirstPieceRule::kKeep:
      return p;
    case FirstPieceRule::kStripOneSpace:
      if (p[0] == ' ') p.remove_prefix(1);
      return p;
    case FirstPieceRule::kRemoveSpaces:
      // Only normal tokens spell spaces as "▁"; added tokens keep theirs.
      if (types[id] != TokenType::kNormal) return p;
      storage.assign(p);
      std::erase(storage, ' ');
      return storage;
  }
  return p;
}

std::vector<int32_t> TokenizerImpl::encode(std::string_view input, bool add_special,
                                           bool parse_special) const {
  std::string repaired;
  const std::string_view text = utf8::sanitize(input, repaired);
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special) out.insert(out.end(), prefix_ids.begin(), prefix_ids.end());

  thread_local std::vector<Fragment> fragments;
  thread_local std::vector<std::string_view> words;
  fragments.clear();
  if (specials.empty()) {
    if (!text.empty()) fragments.push_back({-1, 0, text.size()});
  } else {
    specials.split(text, parse_special, fragments);
  }
  std::string normalized_storage;
  bool after_special = false;
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    const FragmentContext ctx{f.begin == 0, after_special};
    after_special = false;
    const std::string_view normalized =
        normalizer.apply(text.substr(f.begin, f.end - f.begin), ctx, normalized_storage);
    words.clear();
    pre_tokenizer.split(normalized, words);
    for (std::string_view w : words) model->encode_word(w, out);
  }
  if (add_special) out.insert(out.end(), suffix_ids.begin(), suffix_ids.end());
  return out;
}

std::string TokenizerImpl::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string raw;
  bool first = true;
  for (int32_t id : ids) {
    if (padding(id)) continue;
    check_id(id);
    if (skip_special && is_special(id)) continue;
    std::string storage;
    raw.append(piece(id, first, storage));
    first = false;
  }
  if (utf8::is_valid(raw)) return raw;
  std::string out;
  utf8::repair(raw, out, /*final=*/true);
  return out;
}

}  // namespace inflight
