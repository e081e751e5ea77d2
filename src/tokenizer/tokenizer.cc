#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/check.h"
#include "formats/gguf.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/gpt2_files.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/tiktoken_file.h"
#include "tokenizer/tokenizer_impl.h"

namespace inflight {

namespace fs = std::filesystem;

namespace {

bool has_gguf_magic(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  char magic[4] = {};
  return f.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

std::unique_ptr<TokenizerImpl> load_file(const fs::path& p) {
  const std::string ext = p.extension().string();
  if (ext == ".gguf" || has_gguf_magic(p)) return load_gguf_tokenizer(*GgufFile::open(p.string()));
  if (ext == ".tiktoken") return load_tiktoken(p.string());
  if (p.filename() == "encoder.json") {
    return load_gpt2_files(p.string(), (p.parent_path() / "vocab.bpe").string());
  }
  if (ext == ".json") return load_hf_tokenizer_json(p.string());
  INFLIGHT_THROW(ErrorCode::kUnsupported,
                 "{}: not a tokenizer file we know (expected .gguf, tokenizer.json, .tiktoken or "
                 "encoder.json)",
                 p.string());
}

std::unique_ptr<TokenizerImpl> load_directory(const fs::path& dir) {
  if (fs::exists(dir / "tokenizer.json"))
    return load_hf_tokenizer_json((dir / "tokenizer.json").string());
  if (fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe")) {
    return load_gpt2_files((dir / "encoder.json").string(), (dir / "vocab.bpe").string());
  }
  std::vector<fs::path> tiktoken, gguf;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".tiktoken") tiktoken.push_back(entry.path());
    if (entry.path().extension() == ".gguf") gguf.push_back(entry.path());
  }
  if (tiktoken.size() == 1) return load_tiktoken(tiktoken[0].string());
  if (gguf.size() == 1) return load_file(gguf[0]);
  INFLIGHT_THROW(ErrorCode::kNotFound,
                 "{}: no tokenizer found (looked for tokenizer.json, encoder.json + vocab.bpe, "
                 "exactly one *.tiktoken, exactly one *.gguf)",
                 dir.string());
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_path(const std::string& path) {
  const fs::path p(path);
  INFLIGHT_CHECK_CODE(fs::exists(p), ErrorCode::kNotFound, "tokenizer path '{}' does not exist",
                      path);
  return std::make_unique<Tokenizer>(fs::is_directory(p) ? load_directory(p) : load_file(p));
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& gguf) {
  return std::make_unique<Tokenizer>(load_gguf_tokenizer(gguf));
}

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {
  INFLIGHT_CHECK(impl_ != nullptr, "Tokenizer built without an implementation");
}

Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return impl_->encode(text, add_special, parse_special);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  return impl_->decode(ids, skip_special);
}

std::string Tokenizer::token_piece(int32_t id, bool skip_special, bool first) const {
  if (impl_->padding(id)) return {};
  impl_->check_id(id);
  if (skip_special && impl_->is_special(id)) return {};
  std::string storage;
  return std::string(impl_->piece(id, first, storage));
}

int32_t Tokenizer::vocab_size() const {
  return impl_->vocab_size();
}
TokenizerKind Tokenizer::kind() const {
  return impl_->kind;
}
const std::string& Tokenizer::description() const {
  return impl_->description;
}
int32_t Tokenizer::bos_id() const {
  return impl_->bos;
}
int32_t Tokenizer::eos_id() const {
  return impl_->eos;
}
int32_t Tokenizer::pad_id() const {
  return impl_->pad;
}
int32_t Tokenizer::unk_id() const {
  return impl_->unk;
}
bool Tokenizer::add_bos() const {
  return impl_->add_bos;
}
bool Tokenizer::add_eos() const {
  return impl_->add_eos;
}
std::span<const int32_t> Tokenizer::eog_ids() const {
  return impl_->eog;
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(impl_->eog.begin(), impl_->eog.end(), id);
}

bool Tokenizer::is_special(int32_t id) const {
  return impl_->is_special(id);
}

TokenType Tokenizer::token_type(int32_t id) const {
  impl_->check_id(id);
  return impl_->types[id];
}

std::string_view Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->texts[id];
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const int32_t id = impl_->text_index.find(text);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

bool Tokenizer::strips_leading_space() const {
  return impl_->first_piece_rule != FirstPieceRule::kKeep;
}

}  // namespace inflight
