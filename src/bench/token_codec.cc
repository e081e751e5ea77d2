#include "bench/token_codec.h"

#include "tokenizer/tokenizer.h"

namespace inflight::bench {
namespace {

class TokenizerCodec final : public TokenCodec {
 public:
  explicit TokenizerCodec(std::unique_ptr<Tokenizer> tok) : tok_(std::move(tok)) {}

  std::vector<int32_t> encode(std::string_view text) const override {
    return tok_->encode(text, /*add_special=*/false, /*parse_special=*/false);
  }
  std::string decode(std::span<const int32_t> ids) const override {
    return tok_->decode(ids, /*skip_special=*/true);
  }
  int32_t vocab_size() const override { return tok_->vocab_size(); }
  bool is_ordinary(int32_t id) const override {
    if (tok_->is_special(id)) return false;
    const TokenType type = tok_->token_type(id);
    return type != TokenType::kUnused && type != TokenType::kUnknown;
  }
  std::string description() const override { return tok_->description(); }

 private:
  std::unique_ptr<Tokenizer> tok_;
};

}  // namespace

std::unique_ptr<TokenCodec> load_token_codec(const std::string& path) {
  return std::make_unique<TokenizerCodec>(Tokenizer::from_path(path));
}

}  // namespace inflight::bench
