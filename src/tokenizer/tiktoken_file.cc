#include "tokenizer/tiktoken_file.h"

#include <filesystem>
#include <utility>

#include "core/check.h"
#include "core/mmap_file.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/tokenizer_impl.h"

namespace inflight {

namespace {

// The patterns and special tokens of tiktoken's openai_public encodings.
constexpr const char* kR50kPattern =
    R"('(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s)";
constexpr const char* kCl100kPattern =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s)";
constexpr const char* kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Encoding {
  std::string_view name;
  const char* pattern;
  std::vector<std::pair<std::string_view, int32_t>> specials;
};

const Encoding* find_encoding(std::string_view name) {
  static const std::vector<Encoding> kEncodings = {
      {"r50k_base", kR50kPattern, {{"<|endoftext|>", 50256}}},
      {"p50k_base", kR50kPattern, {{"<|endoftext|>", 50256}}},
      {"cl100k_base",
       kCl100kPattern,
       {{"<|endoftext|>", 100257},
        {"<|fim_prefix|>", 100258},
        {"<|fim_middle|>", 100259},
        {"<|fim_suffix|>", 100260},
        {"<|endofprompt|>", 100276}}},
      {"o200k_base", kO200kPattern, {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}},
  };
  for (const Encoding& e : kEncodings) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with '=' padding; false on a bad character.
bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const int v = base64_value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<TokenizerImpl> load_tiktoken(const std::string& path) {
  const std::string stem = std::filesystem::path(path).stem().string();
  const Encoding* enc = find_encoding(stem);
  INFLIGHT_CHECK_CODE(enc != nullptr, ErrorCode::kUnsupported,
                      "{}: unknown tiktoken encoding '{}' (the file name picks the regex and "
                      "special tokens: r50k_base, p50k_base, cl100k_base, o200k_base)",
                      path, stem);
  const auto file = MmapFile::open(path);
  const std::string_view data(reinterpret_cast<const char*>(file->data()), file->size());

  auto impl = std::make_unique<TokenizerImpl>();
  BpeOptions options;
  options.input = BpeOptions::Input::kBytes;
  options.rank_by_concatenation = true;
  options.ignore_merges = true;  // tiktoken emits a piece that is a token as is
  auto model = std::make_unique<BpeModel>(options);
  std::vector<std::pair<std::string, int32_t>> tokens;
  std::string bytes;
  size_t line_no = 0;
  for (size_t pos = 0; pos < data.size();) {
    size_t eol = data.find('\n', pos);
    if (eol == std::string_view::npos) eol = data.size();
    const std::string_view line = data.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    int64_t rank = -1;
    if (space != std::string_view::npos) {
      rank = 0;
      for (char c : line.substr(space + 1)) {
        if (c < '0' || c > '9' || rank > INT32_MAX / 10) {
          rank = -1;
          break;
        }
        rank = rank * 10 + (c - '0');
      }
    }
    INFLIGHT_CHECK_CODE(rank >= 0 && base64_decode(line.substr(0, space), bytes) && !bytes.empty(),
                        ErrorCode::kInvalidFile,
                        "{}:{}: expected '<base64 token> <rank>', got '{}'", path, line_no,
                        line.substr(0, 80));
    tokens.emplace_back(bytes, static_cast<int32_t>(rank));
  }
  int32_t n = 0;
  for (const auto& [t, r] : tokens) n = std::max(n, r + 1);
  for (const auto& [t, id] : enc->specials) n = std::max(n, id + 1);
  impl->texts.assign(n, std::string());
  impl->types.assign(n, TokenType::kUnused);  // ranks tiktoken leaves unassigned stay unused
  for (auto& [t, r] : tokens) {
    model->add_token(t, r);
    impl->texts[r] = std::move(t);
    impl->types[r] = TokenType::kNormal;
  }
  std::vector<SpecialTokens::Entry> entries;
  for (const auto& [text, id] : enc->specials) {
    impl->texts[id] = std::string(text);
    impl->types[id] = TokenType::kControl;
    entries.push_back({std::string(text), id, /*always=*/false});
  }
  for (int b = 0; b < 256; ++b) {
    INFLIGHT_CHECK_CODE(model->byte_id(static_cast<uint8_t>(b)) >= 0, ErrorCode::kInvalidFile,
                        "{}: byte 0x{:02X} has no token, so some text cannot be encoded", path, b);
  }
  impl->specials = SpecialTokens(std::move(entries), SpecialTokens::Rule::kLeftmostLongest);
  impl->pre_tokenizer.add_regex(enc->pattern);
  impl->model = std::move(model);
  impl->kind = TokenizerKind::kTiktoken;
  impl->piece_rule = PieceRule::kRaw;
  impl->description = "tiktoken:" + stem;
  impl->eos = enc->specials.front().second;  // <|endoftext|>
  impl->finalize();
  return impl;
}

}  // namespace inflight
