// GGUF vocabulary loading on small hand-built files: merges, special-token matching rules and
// the errors a broken file produces.
#include <gtest/gtest.h>

#include <cstring>

#include "core/check.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace inflight {
namespace {

// Writes GGUF v3 metadata (no tensors) into a byte buffer.
class GgufWriter {
 public:
  void str(const std::string& key, const std::string& v) {
    kv(key, 8);
    string(v);
  }
  void i32(const std::string& key, int32_t v) {
    kv(key, 5);
    pod(v);
  }
  void boolean(const std::string& key, bool v) {
    kv(key, 7);
    pod(static_cast<uint8_t>(v));
  }
  void strings(const std::string& key, const std::vector<std::string>& v) {
    kv(key, 9);
    pod(uint32_t{8});
    pod(uint64_t{v.size()});
    for (const auto& s : v) string(s);
  }
  void i32s(const std::string& key, const std::vector<int32_t>& v) {
    kv(key, 9);
    pod(uint32_t{5});
    pod(uint64_t{v.size()});
    for (int32_t x : v) pod(x);
  }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    auto put = [&](const void* p, size_t n) {
      out.insert(out.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    };
    put("GGUF", 4);
    const uint32_t version = 3;
    const uint64_t n_tensors = 0;
    put(&version, 4);
    put(&n_tensors, 8);
    put(&n_kv_, 8);
    out.insert(out.end(), body_.begin(), body_.end());
    return out;
  }

 private:
  template <class T>
  void pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    body_.insert(body_.end(), p, p + sizeof(T));
  }
  void string(const std::string& s) {
    pod(uint64_t{s.size()});
    body_.insert(body_.end(), s.begin(), s.end());
  }
  void kv(const std::string& key, uint32_t type) {
    string(key);
    pod(type);
    ++n_kv_;
  }
  std::vector<uint8_t> body_;
  uint64_t n_kv_ = 0;
};

// A byte-level vocabulary: the byte tokens for "a b c <>/" and space ("Ġ"), merges up to
// "Ġabc", a control token "<ctl>" and a user-defined token "<u>".
GgufWriter tiny_gpt2() {
  GgufWriter w;
  w.str("tokenizer.ggml.model", "gpt2");
  w.str("tokenizer.ggml.pre", "gpt-2");
  w.strings("tokenizer.ggml.tokens", {"a", "b", "c", "\xC4\xA0", "ab", "abc",
                                      "\xC4\xA0"
                                      "abc",
                                      "<ctl>", "<u>", "<", ">", "/", "t", "l", "u"});
  w.i32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 1, 3, 4, 1, 1, 1, 1, 1, 1});
  w.strings("tokenizer.ggml.merges", {"a b", "ab c", "\xC4\xA0 abc", "x y"});
  w.i32("tokenizer.ggml.bos_token_id", 7);
  w.i32("tokenizer.ggml.eos_token_id", 7);
  return w;
}

std::unique_ptr<Tokenizer> load(const GgufWriter& w, std::vector<uint8_t>& storage) {
  storage = w.bytes();
  const auto gguf = GgufFile::parse(storage.data(), storage.size(), "tiny.gguf");
  return Tokenizer::from_gguf(*gguf);
}

TEST(GgufVocab, MergesSpecialsAndUserDefinedTokens) {
  std::vector<uint8_t> buf;
  const auto tok = load(tiny_gpt2(), buf);
  EXPECT_EQ(tok->encode("abc abc", false, false), (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(tok->encode("abcab", true, false), (std::vector<int32_t>{5, 4}));  // no add_bos
  // Control tokens only with parse_special; user-defined tokens always.
  EXPECT_EQ(tok->encode("<ctl>", false, true), (std::vector<int32_t>{7}));
  EXPECT_EQ(tok->encode("<ctl>", false, false), (std::vector<int32_t>{9, 2, 12, 13, 10}));
  EXPECT_EQ(tok->encode("a<u>b", false, false), (std::vector<int32_t>{0, 8, 1}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{6, 7, 8}, false), " abc<ctl><u>");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{6, 7, 8}, true), " abc<u>");
  EXPECT_TRUE(tok->is_special(7));
  EXPECT_FALSE(tok->is_special(8));
  EXPECT_EQ(tok->token_type(8), TokenType::kUserDefined);
  EXPECT_EQ(tok->eog_ids().size(), 1u);
}

void expect_error(const GgufWriter& w, ErrorCode code, const std::string& needle) {
  std::vector<uint8_t> buf;
  try {
    load(w, buf);
    FAIL() << "no error; expected one mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GgufVocab, BrokenFilesGiveActionableErrors) {
  {
    GgufWriter w;
    w.str("tokenizer.ggml.model", "gpt2");
    expect_error(w, ErrorCode::kNotFound, "tokenizer.ggml.tokens");
  }
  {
    GgufWriter w;
    w.str("tokenizer.ggml.model", "t5");
    w.strings("tokenizer.ggml.tokens", {"a"});
    expect_error(w, ErrorCode::kUnsupported, "'t5'");  // the message names the model
  }
  {
    GgufWriter w;
    w.str("tokenizer.ggml.model", "gpt2");
    w.str("tokenizer.ggml.pre", "no-such-pre");
    w.strings("tokenizer.ggml.tokens", {"a"});
    w.strings("tokenizer.ggml.merges", {});
    expect_error(w, ErrorCode::kUnsupported, "no-such-pre");
  }
  {
    GgufWriter w;  // add_bos_token without a usable BOS id (the default 11 is out of range)
    w.str("tokenizer.ggml.model", "gpt2");
    w.str("tokenizer.ggml.pre", "gpt-2");
    w.strings("tokenizer.ggml.tokens", {"a"});
    w.strings("tokenizer.ggml.merges", {});
    w.boolean("tokenizer.ggml.add_bos_token", true);
    expect_error(w, ErrorCode::kInvalidFile, "bos_token_id");
  }
  {
    GgufWriter w;
    w.str("tokenizer.ggml.model", "llama");
    w.strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    w.i32s("tokenizer.ggml.token_type", {2, 3});
    expect_error(w, ErrorCode::kInvalidFile, "token_type");
  }
}

TEST(GgufVocab, LongestSpecialTokenWinsAsInLlamaCpp) {
  GgufWriter w;
  w.str("tokenizer.ggml.model", "gpt2");
  w.str("tokenizer.ggml.pre", "gpt-2");
  w.strings("tokenizer.ggml.tokens", {"<", "a", ">", "b", "<a>", "<a><b>"});
  w.i32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 3, 3});
  w.strings("tokenizer.ggml.merges", {});
  std::vector<uint8_t> buf;
  const auto tok = load(w, buf);
  EXPECT_EQ(tok->encode("<a><b><a>", false, true), (std::vector<int32_t>{5, 4}));
}

}  // namespace
}  // namespace inflight
