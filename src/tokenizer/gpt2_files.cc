#include "tokenizer/gpt2_files.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "core/check.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"

namespace inflight {

namespace {

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  INFLIGHT_CHECK_CODE(f.good(), ErrorCode::kNotFound, "cannot open '{}'", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::unique_ptr<TokenizerImpl> load_gpt2_files(const std::string& encoder_json,
                                               const std::string& vocab_bpe) {
  const nlohmann::json encoder = [&] {
    try {
      return nlohmann::json::parse(read_file(encoder_json));
    } catch (const nlohmann::json::exception& e) {
      INFLIGHT_THROW(ErrorCode::kInvalidFile, "{}: not valid JSON: {}", encoder_json, e.what());
    }
  }();
  INFLIGHT_CHECK_CODE(encoder.is_object() && !encoder.empty(), ErrorCode::kInvalidFile,
                      "{}: expected an object mapping tokens to ids", encoder_json);
  auto impl = std::make_unique<TokenizerImpl>();
  int64_t n = 0;
  for (const auto& [text, id] : encoder.items()) {
    INFLIGHT_CHECK_CODE(
        id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (1 << 24),
        ErrorCode::kInvalidFile, "{}: token '{}' has a bad id {}", encoder_json, text, id.dump());
    n = std::max<int64_t>(n, id.get<int64_t>() + 1);
  }
  impl->texts.assign(n, std::string());
  impl->types.assign(n, TokenType::kUnused);
  BpeOptions options;
  options.input = BpeOptions::Input::kBytes;
  auto model = std::make_unique<BpeModel>(options);
  TokenIndex by_text;
  for (const auto& [text, id_json] : encoder.items()) {
    const auto id = id_json.get<int32_t>();
    impl->texts[id] = text;
    impl->types[id] = TokenType::kNormal;
    by_text.insert(text, id);
    if (auto raw = byte_level::decode(text)) model->add_token(*raw, id);
  }
  const int32_t eot = by_text.find("<|endoftext|>");
  if (eot >= 0) impl->types[eot] = TokenType::kControl;

  const std::string merges = read_file(vocab_bpe);
  std::istringstream lines(merges);
  std::string line;
  uint32_t rank = 0;
  size_t line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    const size_t space = line.find(' ', 1);
    const int32_t left =
        space == line.npos ? -1 : by_text.find(std::string_view(line).substr(0, space));
    const int32_t right =
        space == line.npos ? -1 : by_text.find(std::string_view(line).substr(space + 1));
    INFLIGHT_CHECK_CODE(left >= 0 && right >= 0 && model->add_merge(left, right, rank),
                        ErrorCode::kInvalidFile,
                        "{}:{}: merge '{}' does not name two tokens of {} whose concatenation is "
                        "a token",
                        vocab_bpe, line_no, line, encoder_json);
    ++rank;
  }
  impl->pre_tokenizer.add_regex(kGpt2Pattern);
  if (eot >= 0) {
    impl->specials =
        SpecialTokens({{"<|endoftext|>", eot, false}}, SpecialTokens::Rule::kLeftmostLongest);
    impl->bos = impl->eos = eot;
  }
  impl->model = std::move(model);
  impl->kind = TokenizerKind::kByteLevelBpe;
  impl->piece_rule = PieceRule::kByteLevel;
  impl->description = "gpt2:encoder.json";
  impl->finalize();
  return impl;
}

}  // namespace inflight
