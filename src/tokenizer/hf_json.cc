#include "tokenizer/hf_json.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"

namespace inflight {

namespace {

using json = nlohmann::json;

constexpr const char* kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// What the pieces of a tokenizer.json tell about each other while loading.
struct HfState {
  std::string path;
  TokenizerImpl& impl;
  bool byte_level = false;             // a ByteLevel pre-tokenizer or decoder
  bool sentencepiece = false;          // "▁" for spaces / <0xXX> bytes in the decoder
  bool byte_fallback_decoder = false;  // the decoder turns <0xXX> tokens into bytes
  bool byte_level_pre = false;         // a ByteLevel pre-tokenizer was seen (it must be last)
};

json read_json(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  INFLIGHT_CHECK_CODE(f.good(), ErrorCode::kNotFound, "cannot open '{}'", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    INFLIGHT_THROW(ErrorCode::kInvalidFile, "{}: not valid JSON: {}", path, e.what());
  }
}

std::string type_of(const HfState& st, const json& j, const std::string& where) {
  INFLIGHT_CHECK_CODE(j.is_object() && j.contains("type") && j["type"].is_string(),
                      ErrorCode::kInvalidFile, "{}: {} has no \"type\"", st.path, where);
  return j["type"].get<std::string>();
}

// {"String": s} or {"Regex": r}: (text, is_regex).
std::pair<std::string, bool> pattern_of(const HfState& st, const json& j,
                                        const std::string& where) {
  const json& p = j.value("pattern", json());
  if (p.contains("String")) return {p["String"].get<std::string>(), false};
  if (p.contains("Regex")) return {p["Regex"].get<std::string>(), true};
  INFLIGHT_THROW(ErrorCode::kInvalidFile, "{}: {}.pattern is neither String nor Regex", st.path,
                 where);
}

SplitBehavior behavior_of(const HfState& st, const json& j, const std::string& where) {
  const std::string b = j.value("behavior", "Isolated");
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  INFLIGHT_THROW(ErrorCode::kUnsupported, "{}: {}.behavior '{}' is not supported", st.path, where,
                 b);
}

void parse_normalizer(HfState& st, const json& n, const std::string& where) {
  if (n.is_null()) return;
  const std::string type = type_of(st, n, where);
  Normalizer& norm = st.impl.normalizer;
  if (type == "NFC") {
    norm.add_nfc();
  } else if (type == "Prepend") {
    norm.add_prepend(n.at("prepend").get<std::string>());
  } else if (type == "Replace") {
    auto [pattern, is_regex] = pattern_of(st, n, where);
    INFLIGHT_CHECK_CODE(!is_regex, ErrorCode::kUnsupported,
                        "{}: {} Replace with a Regex pattern is not supported", st.path, where);
    norm.add_replace(pattern, n.at("content").get<std::string>());
  } else if (type == "Sequence") {
    const json& list = n.at("normalizers");
    for (size_t i = 0; i < list.size(); ++i) {
      parse_normalizer(st, list[i], where + ".normalizers[" + std::to_string(i) + "]");
    }
  } else {
    INFLIGHT_THROW(ErrorCode::kUnsupported, "{}: {} type '{}' is not supported", st.path, where,
                   type);
  }
}

void parse_pre_tokenizer(HfState& st, const json& p, const std::string& where, bool first) {
  if (p.is_null()) return;
  const std::string type = type_of(st, p, where);
  PreTokenizer& pre = st.impl.pre_tokenizer;
  // NOTE: HF's ByteLevel rewrites the text into its byte alphabet, so later steps would see
  // "Ġ" where we see ' ': only a ByteLevel that comes last splits the same way here.
  INFLIGHT_CHECK_CODE(!st.byte_level_pre || type == "Sequence", ErrorCode::kUnsupported,
                      "{}: {} '{}' after a ByteLevel pre-tokenizer is not supported", st.path,
                      where, type);
  if (type == "Sequence") {
    const json& list = p.at("pretokenizers");
    for (size_t i = 0; i < list.size(); ++i) {
      parse_pre_tokenizer(st, list[i], where + ".pretokenizers[" + std::to_string(i) + "]",
                          first && i == 0);
    }
  } else if (type == "Split") {
    auto [pattern, is_regex] = pattern_of(st, p, where);
    const SplitBehavior b = behavior_of(st, p, where);
    const bool invert = p.value("invert", false);
    if (is_regex) {
      pre.add_regex(pattern, b, invert);
    } else {
      pre.add_literal(pattern, b, invert);
    }
  } else if (type == "ByteLevel") {
    st.byte_level = true;
    st.byte_level_pre = true;
    if (p.value("add_prefix_space", false)) {
      INFLIGHT_CHECK_CODE(first, ErrorCode::kUnsupported,
                          "{}: {} ByteLevel with add_prefix_space after another pre-tokenizer "
                          "is not supported",
                          st.path, where);
      st.impl.normalizer.add_space_prefix(" ", PrefixWhen::kAlways, /*skip_if_present=*/true);
    }
    if (p.value("use_regex", true)) pre.add_regex(kByteLevelPattern);
  } else if (type == "Metaspace") {
    INFLIGHT_CHECK_CODE(first, ErrorCode::kUnsupported,
                        "{}: {} Metaspace after another pre-tokenizer is not supported", st.path,
                        where);
    const std::string repl = p.value("replacement", "\xE2\x96\x81");
    std::string scheme = p.value("prepend_scheme", "");
    if (scheme.empty()) scheme = p.value("add_prefix_space", true) ? "always" : "never";
    st.impl.normalizer.add_replace(" ", repl);
    if (scheme != "never") {
      st.impl.normalizer.add_space_prefix(
          repl, scheme == "first" ? PrefixWhen::kAtStart : PrefixWhen::kAlways, true);
    }
    if (p.value("split", true)) pre.add_literal(repl, SplitBehavior::kMergedWithNext);
    st.sentencepiece = true;
  } else if (type == "Digits") {
    pre.add_regex(p.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else if (type == "Punctuation") {
    pre.add_regex(R"([\p{P}!-/:-@\[-`{-~])", behavior_of(st, p, where));
  } else if (type == "Whitespace") {
    pre.add_regex(R"(\w+|[^\w\s]+)", SplitBehavior::kRemoved, /*invert=*/true);
  } else if (type == "WhitespaceSplit") {
    pre.add_regex(R"(\s+)", SplitBehavior::kRemoved);
  } else {
    INFLIGHT_THROW(ErrorCode::kUnsupported, "{}: {} type '{}' is not supported", st.path, where,
                   type);
  }
}

void parse_decoder(HfState& st, const json& d, const std::string& where) {
  if (d.is_null()) return;
  const std::string type = type_of(st, d, where);
  if (type == "Sequence") {
    const json& list = d.at("decoders");
    for (size_t i = 0; i < list.size(); ++i) {
      parse_decoder(st, list[i], where + ".decoders[" + std::to_string(i) + "]");
    }
  } else if (type == "ByteLevel") {
    st.byte_level = true;
  } else if (type == "Metaspace") {
    st.sentencepiece = true;
    const std::string scheme = d.value("prepend_scheme", "always");
    if (scheme != "never" && d.value("add_prefix_space", true)) {
      st.impl.first_piece_rule = FirstPieceRule::kRemoveSpaces;
    }
  } else if (type == "Replace") {
    auto [pattern, is_regex] = pattern_of(st, d, where);
    INFLIGHT_CHECK_CODE(!is_regex && pattern == "\xE2\x96\x81" && d.value("content", "") == " ",
                        ErrorCode::kUnsupported,
                        "{}: {} Replace decoder other than '\u2581' -> ' ' is not supported",
                        st.path, where);
    st.sentencepiece = true;
  } else if (type == "Strip") {
    const int start = d.value("start", 0);
    INFLIGHT_CHECK_CODE(d.value("content", " ") == " " && start <= 1 && d.value("stop", 0) == 0,
                        ErrorCode::kUnsupported,
                        "{}: {} Strip decoder other than one leading space is not supported",
                        st.path, where);
    if (start == 1) st.impl.first_piece_rule = FirstPieceRule::kStripOneSpace;
  } else if (type == "ByteFallback") {
    st.sentencepiece = true;
    st.byte_fallback_decoder = true;
  } else if (type == "Fuse") {
  } else {
    INFLIGHT_THROW(ErrorCode::kUnsupported, "{}: {} type '{}' is not supported", st.path, where,
                   type);
  }
}

// The ids that TemplateProcessing's "single" template puts before and after the sequence.
void parse_post_processor(HfState& st, const json& p, const std::string& where) {
  if (p.is_null()) return;
  const std::string type = type_of(st, p, where);
  TokenizerImpl& impl = st.impl;
  if (type == "Sequence") {
    const json& list = p.at("processors");
    for (size_t i = 0; i < list.size(); ++i) {
      parse_post_processor(st, list[i], where + ".processors[" + std::to_string(i) + "]");
    }
  } else if (type == "TemplateProcessing") {
    const json& specials = p.value("special_tokens", json::object());
    bool after = false;
    for (const json& item : p.at("single")) {
      if (item.contains("Sequence")) {
        after = true;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      INFLIGHT_CHECK_CODE(specials.contains(name), ErrorCode::kInvalidFile,
                          "{}: {} uses special token '{}' that it does not define", st.path, where,
                          name);
      for (const json& id : specials[name].at("ids")) {
        (after ? impl.suffix_ids : impl.prefix_ids).push_back(id.get<int32_t>());
      }
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    impl.prefix_ids.push_back(p.at("cls").at(1).get<int32_t>());
    impl.suffix_ids.push_back(p.at("sep").at(1).get<int32_t>());
  } else if (type != "ByteLevel") {
    INFLIGHT_THROW(ErrorCode::kUnsupported, "{}: {} type '{}' is not supported", st.path, where,
                   type);
  }
}

// "<s>" or {"content": "<s>", ...} in tokenizer_config.json -> the token's id, or kNoToken.
int32_t config_token(const json& config, const char* key, const TokenizerImpl& impl,
                     const TokenIndex& by_text) {
  if (!config.contains(key)) return kNoToken;
  const json& v = config[key];
  const json& name = v.is_object() ? v.value("content", json()) : v;
  if (!name.is_string()) return kNoToken;
  const int32_t id = by_text.find(name.get<std::string>());
  return id >= 0 ? id : kNoToken;
}

void build_model(HfState& st, const json& m, TokenIndex& by_text) {
  TokenizerImpl& impl = st.impl;
  const std::string type = type_of(st, m, "model");
  INFLIGHT_CHECK_CODE(type == "BPE", ErrorCode::kUnsupported,
                      "{}: model type '{}' is not supported (only BPE)", st.path, type);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    INFLIGHT_CHECK_CODE(!m.contains(key) || m[key].is_null() || m[key] == "",
                        ErrorCode::kUnsupported, "{}: model.{} is not supported", st.path, key);
  }
  INFLIGHT_CHECK_CODE(!m.contains("dropout") || m["dropout"].is_null() || m["dropout"] == 0.0,
                      ErrorCode::kUnsupported, "{}: model.dropout is not supported", st.path);
  BpeOptions options;
  options.input = st.byte_level ? BpeOptions::Input::kBytes : BpeOptions::Input::kChars;
  options.ignore_merges = m.value("ignore_merges", false);
  options.byte_fallback = m.value("byte_fallback", false);
  options.fuse_unk = m.value("fuse_unk", false);
  const json& vocab = m.at("vocab");
  if (const json& unk = m.value("unk_token", json()); unk.is_string()) {
    const auto it = vocab.find(unk.get<std::string>());
    INFLIGHT_CHECK_CODE(it != vocab.end(), ErrorCode::kInvalidFile,
                        "{}: model.unk_token '{}' is not in model.vocab", st.path,
                        unk.get<std::string>());
    options.unk_id = impl.unk = it->get<int32_t>();
  }
  auto model = std::make_unique<BpeModel>(options);
  for (const auto& [text, id_json] : vocab.items()) {
    const auto id = id_json.get<int32_t>();
    INFLIGHT_CHECK_CODE(id >= 0 && id < impl.vocab_size(), ErrorCode::kInvalidFile,
                        "{}: model.vocab['{}'] = {} is out of range", st.path, text, id);
    impl.texts[id] = text;
    // <0xXX> decode to their byte only through a ByteFallback decoder; otherwise HF writes
    // them out as text.
    impl.types[id] = st.byte_fallback_decoder && text.size() == 6 && text.rfind("<0x", 0) == 0
                         ? TokenType::kByte
                         : TokenType::kNormal;
    by_text.insert(text, id);
    if (!st.byte_level) {
      model->add_token(text, id);
    } else if (auto raw = byte_level::decode(text)) {
      model->add_token(*raw, id);
    }
  }
  uint32_t rank = 0;
  for (const json& merge : m.at("merges")) {
    std::string left, right;
    if (merge.is_array() && merge.size() == 2) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      const std::string s = merge.get<std::string>();
      const size_t space = s.find(' ', 1);
      INFLIGHT_CHECK_CODE(space != s.npos, ErrorCode::kInvalidFile,
                          "{}: model.merges[{}] '{}' is not 'left right'", st.path, rank, s);
      left = s.substr(0, space);
      right = s.substr(space + 1);
    }
    const int32_t l = by_text.find(left), r = by_text.find(right);
    INFLIGHT_CHECK_CODE(l >= 0 && r >= 0 && model->add_merge(l, r, rank), ErrorCode::kInvalidFile,
                        "{}: model.merges[{}] ('{}', '{}') does not name tokens whose "
                        "concatenation is a token",
                        st.path, rank, left, right);
    ++rank;
  }
  impl.model = std::move(model);
}

}  // namespace

std::unique_ptr<TokenizerImpl> load_hf_tokenizer_json(const std::string& path) {
  const json j = read_json(path);
  INFLIGHT_CHECK_CODE(j.is_object() && j.contains("model"), ErrorCode::kInvalidFile,
                      "{}: not a tokenizer.json (no \"model\")", path);
  auto impl = std::make_unique<TokenizerImpl>();
  HfState st{path, *impl};
  const json& added = j.value("added_tokens", json::array());

  // Vocabulary size: every id named by the model or the added tokens.
  int64_t n = 0;
  for (const auto& [text, id] : j["model"].at("vocab").items())
    n = std::max<int64_t>(n, id.get<int64_t>() + 1);
  for (const json& a : added) n = std::max<int64_t>(n, a.at("id").get<int64_t>() + 1);
  INFLIGHT_CHECK_CODE(n > 0 && n < (int64_t{1} << 24), ErrorCode::kInvalidFile,
                      "{}: vocabulary size {} is not plausible", path, n);
  impl->texts.assign(n, std::string());
  impl->types.assign(n, TokenType::kUnused);

  parse_normalizer(st, j.value("normalizer", json()), "normalizer");
  parse_pre_tokenizer(st, j.value("pre_tokenizer", json()), "pre_tokenizer", true);
  parse_decoder(st, j.value("decoder", json()), "decoder");
  TokenIndex by_text;
  build_model(st, j["model"], by_text);

  std::vector<SpecialTokens::Entry> entries;
  for (const json& a : added) {
    const auto id = a.at("id").get<int32_t>();
    const std::string content = a.at("content").get<std::string>();
    const bool special = a.value("special", false);
    impl->texts[id] = content;
    impl->types[id] = special ? TokenType::kControl : TokenType::kUserDefined;
    by_text.insert(content, id);
    SpecialTokens::Entry e{content, id, !special};
    e.lstrip = a.value("lstrip", false);
    e.rstrip = a.value("rstrip", false);
    entries.push_back(std::move(e));
  }
  impl->specials = SpecialTokens(std::move(entries), SpecialTokens::Rule::kLeftmostLongest);
  parse_post_processor(st, j.value("post_processor", json()), "post_processor");

  const auto config_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  const json config =
      std::filesystem::exists(config_path) ? read_json(config_path.string()) : json::object();
  impl->bos = config_token(config, "bos_token", *impl, by_text);
  impl->eos = config_token(config, "eos_token", *impl, by_text);
  impl->pad = config_token(config, "pad_token", *impl, by_text);
  if (impl->unk == kNoToken) impl->unk = config_token(config, "unk_token", *impl, by_text);
  if (impl->bos == kNoToken && !impl->prefix_ids.empty()) impl->bos = impl->prefix_ids.front();
  for (const char* name : {"</s>", "<|end_of_text|>", "<|endoftext|>", "<|im_end|>"}) {
    if (impl->eos == kNoToken) impl->eos = by_text.find(name) >= 0 ? by_text.find(name) : kNoToken;
  }

  impl->kind = st.byte_level ? TokenizerKind::kByteLevelBpe : TokenizerKind::kSentencePiece;
  impl->piece_rule = st.byte_level      ? PieceRule::kByteLevel
                     : st.sentencepiece ? PieceRule::kSentencePiece
                                        : PieceRule::kRaw;
  impl->description = "hf:" + std::filesystem::path(path).parent_path().filename().string();
  impl->finalize();
  return impl;
}

}  // namespace inflight
