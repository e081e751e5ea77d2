// GgufFile: parsing, typed getters, files written by the `gguf` Python package and by
// llama.cpp, and hostile inputs (each must give an Error, never a crash or a huge allocation).
#include "formats/gguf.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "file_builders.h"
#include "formats/ggml_types.h"
#include "test_data.h"

namespace inflight {
namespace {

using testing::Bytes;
using testing::GgufBuilder;
using testing::put;
using testing::put_str;

const std::string kFixtures = std::string(INFLIGHT_SOURCE_DIR) + "/tests/model/fixtures";

// A small valid file: a few keys of several types and two tensors.
GgufBuilder small_builder() {
  GgufBuilder g;
  g.kv_str("general.architecture", "llama")
      .kv_u32("llama.block_count", 2)
      .kv_f32("llama.rope.freq_base", 500000.0f)
      .kv_str_array("tokenizer.ggml.tokens", {"<s>", "</s>", "héllo"})
      .tensor("a.weight", 0, {2, 3}, testing::f32_bytes({1, 2, 3, 4, 5, 6}))
      .tensor("b.weight", 0, {4}, testing::f32_bytes({-1, -2, -3, -4}));
  return g;
}

// Parses a private, exactly sized copy so that AddressSanitizer sees any overread.
std::shared_ptr<GgufFile> parse_copy(const Bytes& bytes, Bytes* keep) {
  *keep = bytes;
  return GgufFile::parse(keep->data(), keep->size(), "test.gguf");
}

// Expects parsing to throw Error with `code` and a message containing `needle`.
void expect_error(const Bytes& bytes, ErrorCode code, const std::string& needle) {
  Bytes keep;
  try {
    parse_copy(bytes, &keep);
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Gguf, ParsesBuiltFile) {
  Bytes keep;
  auto f = parse_copy(small_builder().build(), &keep);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.block_count"), 2);
  EXPECT_FLOAT_EQ(f->get_float("llama.rope.freq_base"), 500000.0f);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens"),
            (std::vector<std::string_view>{"<s>", "</s>", "héllo"}));
  EXPECT_EQ(f->type_of("tokenizer.ggml.tokens"), GgufValueType::kArray);
  EXPECT_EQ(f->array_type_of("tokenizer.ggml.tokens"), GgufValueType::kString);
  EXPECT_EQ(f->array_size("tokenizer.ggml.tokens"), 3u);
  EXPECT_EQ(f->keys(), (std::vector<std::string>{"general.architecture", "llama.block_count",
                                                 "llama.rope.freq_base", "tokenizer.ggml.tokens"}));
  ASSERT_EQ(f->tensors().size(), 2u);
  const GgufTensorInfo* a = f->find_tensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (Shape{2, 3}));
  EXPECT_EQ(a->nbytes, 24u);
  EXPECT_EQ(a->offset % 32, 0u);
  float v[6];
  std::memcpy(v, a->data, 24);
  EXPECT_EQ(v[5], 6.0f);
  EXPECT_EQ(f->find_tensor("b.weight")->shape, (Shape{4}));
  EXPECT_EQ(f->find_tensor("c.weight"), nullptr);
}

TEST(Gguf, GettersNameKeyAndFoundType) {
  Bytes keep;
  auto f = parse_copy(small_builder().build(), &keep);
  try {
    f->get_int("general.architecture");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidFile);
    EXPECT_NE(std::string(e.what()).find("'general.architecture' should be an integer, found "
                                         "string"),
              std::string::npos)
        << e.what();
  }
  try {
    f->get_string("missing.key");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("missing.key"), std::string::npos);
  }
  EXPECT_THROW(f->type_of("missing.key"), Error);
  EXPECT_THROW(f->get_float("llama.block_count"), Error);  // u32 is not a float
  EXPECT_THROW(f->get_float_array("tokenizer.ggml.tokens"), Error);
  EXPECT_THROW(f->get_int_array("tokenizer.ggml.tokens"), Error);
  EXPECT_THROW(f->get_string_array("llama.block_count"), Error);
  EXPECT_THROW(f->array_size("llama.block_count"), Error);
  // Defaults apply only when absent.
  EXPECT_EQ(f->get_int_or("missing.key", 7), 7);
  EXPECT_EQ(f->get_string_or("missing.key", "x"), "x");
  EXPECT_EQ(f->get_float_or("missing.key", 1.5), 1.5);
  EXPECT_TRUE(f->get_bool_or("missing.key", true));
  EXPECT_THROW(f->get_int_or("general.architecture", 7), Error);
  EXPECT_THROW(f->get_bool_or("llama.block_count", false), Error);
}

TEST(Gguf, EveryValueTypeFromPythonWriter) {
  auto f = GgufFile::open(kFixtures + "/quant_types.gguf");
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->get_int("test.u8"), 200);
  EXPECT_EQ(f->get_int("test.i8"), -100);
  EXPECT_EQ(f->get_int("test.u16"), 60000);
  EXPECT_EQ(f->get_int("test.i16"), -30000);
  EXPECT_EQ(f->get_int("test.u32"), 4000000000);
  EXPECT_EQ(f->get_int("test.i32"), -2000000000);
  EXPECT_EQ(f->get_int("test.i64"), -(int64_t{1} << 40));
  EXPECT_EQ(f->type_of("test.u64"), GgufValueType::kU64);
  EXPECT_THROW(f->get_int("test.u64"), Error);  // 2^63 + 5 does not fit in int64
  EXPECT_EQ(f->get_float("test.f32"), 0.25);
  EXPECT_EQ(f->get_float("test.f64"), -1.0e-300);
  EXPECT_TRUE(f->get_bool("test.bool"));
  EXPECT_EQ(f->get_string("test.string"), "h\xc3\xa9llo \xe2\x9c\x93");
  EXPECT_EQ(f->get_string_array("test.strings"),
            (std::vector<std::string_view>{"a", "", "\xe6\x97\xa5\xe6\x9c\xac"}));
  EXPECT_EQ(f->get_int_array("test.ints"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f->get_float_array("test.floats"), (std::vector<float>{0.5f, -1.5f}));
  // Nested arrays parse; the flat getters reject them.
  EXPECT_EQ(f->array_type_of("test.nested"), GgufValueType::kArray);
  EXPECT_EQ(f->array_size("test.nested"), 2u);
  EXPECT_THROW(f->get_int_array("test.nested"), Error);
  EXPECT_EQ(f->tensors().size(), 18u);
  EXPECT_EQ(f->find_tensor("q4_k")->shape, (Shape{2, 512}));
  EXPECT_EQ(f->find_tensor("q4_k")->nbytes, 4u * 144);
}

TEST(Gguf, ReadsLlamaCppVocabFiles) {
  INFLIGHT_REQUIRE_DATA(dir, "tokenizers/gguf-vocab");
  struct Case {
    const char* name;
    size_t tokens;
    size_t token_bytes;
    const char* first;
    const char* last;
    size_t merges;
  };
  const Case cases[] = {
      {"llama-spm", 32000, 210919, "<unk>", "\xe7\xbb\x99", 0},
      {"llama-bpe", 128256, 1073445, "!", "<|reserved_special_token_250|>", 280147},
      {"qwen2", 151936, 1372708, "!", "[PAD151935]", 151387},
  };
  const auto scratch = testing::scratch_dir("gguf_vocab");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string xz = dir + "/ggml-vocab-" + c.name + ".gguf.xz";
    const std::string out = (scratch / (std::string(c.name) + ".gguf")).string();
    if (std::system(("xz -dc '" + xz + "' > '" + out + "' 2>/dev/null").c_str()) != 0) {
      GTEST_SKIP() << "skipped: cannot unpack " << xz << " (is xz installed?)";
    }
    auto f = GgufFile::open(out);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_TRUE(f->tensors().empty());
    const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
    ASSERT_EQ(tokens.size(), c.tokens);
    size_t bytes = 0;
    for (auto t : tokens) bytes += t.size();
    EXPECT_EQ(bytes, c.token_bytes);
    EXPECT_EQ(tokens.front(), c.first);
    EXPECT_EQ(tokens.back(), c.last);
    EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type").size(), c.tokens);
    if (c.merges) {
      EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges").size(), c.merges);
    }
    if (std::string(c.name) == "llama-spm") {
      const auto scores = f->get_float_array("tokenizer.ggml.scores");
      ASSERT_EQ(scores.size(), 32000u);
      EXPECT_EQ(scores.back(), -31740.0f);
      EXPECT_TRUE(f->get_bool("tokenizer.ggml.add_bos_token"));
      EXPECT_FALSE(f->get_bool("tokenizer.ggml.add_eos_token"));
    }
  }
}

// ---- hostile input ---------------------------------------------------------------------------

TEST(GgufHostile, EveryTruncationFails) {
  const Bytes full = small_builder().build();
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(n);
    Bytes keep;
    EXPECT_THROW(parse_copy(Bytes(full.begin(), full.begin() + n), &keep), Error);
  }
}

TEST(GgufHostile, RandomCorruptionNeverCrashes) {
  const Bytes full = small_builder().build();
  std::mt19937 rng(42);
  int parsed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Bytes b = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    Bytes keep;
    try {
      auto f = parse_copy(b, &keep);
      ++parsed;
      for (const auto& t : f->tensors()) {  // whatever parsed must lie inside the buffer
        ASSERT_GE(t.data, keep.data());
        ASSERT_LE(t.data + t.nbytes, keep.data() + keep.size());
      }
      for (const auto& k : f->keys()) {
        try {
          if (f->type_of(k) == GgufValueType::kString) f->get_string(k);
          if (f->type_of(k) == GgufValueType::kArray) f->get_string_array(k);
        } catch (const Error&) {
        }
      }
    } catch (const Error&) {
    }
  }
  EXPECT_GT(parsed, 0);  // some flips land in tensor data and leave a valid file
}

TEST(GgufHostile, HeaderProblems) {
  expect_error({}, ErrorCode::kInvalidFile, "not a GGUF file");
  expect_error({'G', 'G', 'U'}, ErrorCode::kInvalidFile, "not a GGUF file");
  Bytes magic = small_builder().build();
  magic[0] = 'X';
  expect_error(magic, ErrorCode::kInvalidFile, "not a GGUF file");
  GgufBuilder v1 = small_builder();
  v1.version = 1;
  expect_error(v1.build(), ErrorCode::kUnsupported, "version 1");
  GgufBuilder v4 = small_builder();
  v4.version = 4;
  expect_error(v4.build(), ErrorCode::kUnsupported, "version 4");
  GgufBuilder be = small_builder();
  be.version = 0x03000000;
  expect_error(be.build(), ErrorCode::kUnsupported, "big-endian");
  GgufBuilder v2 = small_builder();  // same layout as v3 on little-endian files
  v2.version = 2;
  Bytes keep;
  EXPECT_EQ(parse_copy(v2.build(), &keep)->version(), 2u);
}

TEST(GgufHostile, AbsurdCountsFailFast) {
  GgufBuilder many_tensors = small_builder();
  many_tensors.num_tensors = uint64_t{1} << 60;
  expect_error(many_tensors.build(), ErrorCode::kInvalidFile, "claims 1152921504606846976 tensors");
  GgufBuilder many_kv = small_builder();
  many_kv.num_kv = ~uint64_t{0};
  expect_error(many_kv.build(), ErrorCode::kInvalidFile, "metadata entries");
  // A count that fits the header check but not the bytes actually left for tensor infos.
  GgufBuilder more_tensors = small_builder();
  more_tensors.num_tensors = 3;
  expect_error(more_tensors.build(), ErrorCode::kInvalidFile, "");

  Bytes long_string;
  put<uint32_t>(long_string, static_cast<uint32_t>(GgufValueType::kString));
  put<uint64_t>(long_string, uint64_t{1} << 40);
  expect_error(GgufBuilder().kv_raw("k", long_string).build(), ErrorCode::kInvalidFile,
               "string of 1099511627776 bytes");

  Bytes big_array;
  put<uint32_t>(big_array, static_cast<uint32_t>(GgufValueType::kArray));
  put<uint32_t>(big_array, static_cast<uint32_t>(GgufValueType::kU64));
  put<uint64_t>(big_array, uint64_t{1} << 61);
  expect_error(GgufBuilder().kv_raw("arr", big_array).build(), ErrorCode::kInvalidFile,
               "metadata key 'arr': array of 2305843009213693952 u64");

  Bytes strings;  // 2^59 strings: each needs at least 8 bytes
  put<uint32_t>(strings, static_cast<uint32_t>(GgufValueType::kArray));
  put<uint32_t>(strings, static_cast<uint32_t>(GgufValueType::kString));
  put<uint64_t>(strings, uint64_t{1} << 59);
  expect_error(GgufBuilder().kv_raw("s", strings).build(), ErrorCode::kInvalidFile, "array of");

  GgufBuilder long_name;
  long_name.tensor_raw({std::string(70000, 'x'), 0, {1}, testing::f32_bytes({1}), std::nullopt});
  expect_error(long_name.build(), ErrorCode::kInvalidFile, "name is empty, longer than");
}

TEST(GgufHostile, BadKeys) {
  expect_error(GgufBuilder().kv_u32("a", 1).kv_u32("a", 2).build(), ErrorCode::kInvalidFile,
               "'a' appears twice");
  expect_error(GgufBuilder().kv_u32("bad\xff\xfekey", 1).build(), ErrorCode::kInvalidFile,
               "not valid UTF-8");
  expect_error(GgufBuilder().kv_u32("\xc0\xaf", 1).build(), ErrorCode::kInvalidFile,
               "not valid UTF-8");  // overlong '/'
  expect_error(GgufBuilder().kv_u32("\xed\xa0\x80", 1).build(), ErrorCode::kInvalidFile,
               "not valid UTF-8");  // surrogate
  expect_error(GgufBuilder().kv_u32("", 1).build(), ErrorCode::kInvalidFile, "key length 0");
  Bytes bad_type;
  put<uint32_t>(bad_type, 13);
  put<uint32_t>(bad_type, 0);
  expect_error(GgufBuilder().kv_raw("k", bad_type).build(), ErrorCode::kInvalidFile,
               "invalid value type 13");
}

TEST(GgufHostile, NestedArrays) {
  // [[1, 2], [3]] of i32 parses; nesting beyond the limit fails.
  Bytes nested;
  put<uint32_t>(nested, static_cast<uint32_t>(GgufValueType::kArray));
  put<uint32_t>(nested, static_cast<uint32_t>(GgufValueType::kArray));
  put<uint64_t>(nested, 2);
  for (const std::vector<int32_t>& inner : {std::vector<int32_t>{1, 2}, {3}}) {
    put<uint32_t>(nested, static_cast<uint32_t>(GgufValueType::kI32));
    put<uint64_t>(nested, inner.size());
    for (int32_t v : inner) put<int32_t>(nested, v);
  }
  Bytes keep;
  auto f = parse_copy(GgufBuilder().kv_raw("n", nested).kv_u32("after", 9).build(), &keep);
  EXPECT_EQ(f->get_int("after"), 9);  // skipped the nested value exactly
  EXPECT_THROW(f->get_int_array("n"), Error);

  Bytes deep;
  put<uint32_t>(deep, static_cast<uint32_t>(GgufValueType::kArray));
  for (int i = 0; i < 8; ++i) {
    put<uint32_t>(deep, static_cast<uint32_t>(GgufValueType::kArray));
    put<uint64_t>(deep, 1);
  }
  put<uint32_t>(deep, static_cast<uint32_t>(GgufValueType::kU8));
  put<uint64_t>(deep, 0);
  expect_error(GgufBuilder().kv_raw("deep", deep).build(), ErrorCode::kInvalidFile,
               "nested deeper");
}

TEST(GgufHostile, BadAlignment) {
  expect_error(small_builder().kv_u32("general.alignment", 48).build(), ErrorCode::kInvalidFile,
               "general.alignment is 48");
  expect_error(small_builder().kv_u32("general.alignment", 0).build(), ErrorCode::kInvalidFile,
               "general.alignment is 0");
  expect_error(small_builder().kv_str("general.alignment", "32").build(), ErrorCode::kInvalidFile,
               "should be an integer");
}

TEST(GgufHostile, BadTensorInfos) {
  using Spec = GgufBuilder::TensorSpec;
  const auto one = [](Spec s) {
    GgufBuilder g;
    g.kv_u32("x", 1);
    g.tensor_raw(std::move(s));
    return g.build();
  };
  const Bytes four = testing::f32_bytes({1, 2, 3, 4});
  expect_error(one({"t", 0, {4, 0}, four, std::nullopt}), ErrorCode::kInvalidFile,
               "tensor 't': dimension ne[1] = 0");
  expect_error(one({"t", 0, {1, 1, 1, 1, 1}, four, std::nullopt}), ErrorCode::kInvalidFile,
               "5 dimensions");
  expect_error(one({"t", 0, {}, four, std::nullopt}), ErrorCode::kInvalidFile, "0 dimensions");
  expect_error(one({"t", 0, {uint64_t{1} << 62, uint64_t{1} << 62}, four, std::nullopt}),
               ErrorCode::kInvalidFile, "element count overflows");
  expect_error(one({"t", 0, {~uint64_t{0}}, four, std::nullopt}), ErrorCode::kInvalidFile,
               "is invalid");
  expect_error(one({"t", 0, {uint64_t{1} << 62}, four, std::nullopt}), ErrorCode::kInvalidFile,
               "byte size overflows");
  expect_error(one({"t", 99, {4}, four, std::nullopt}), ErrorCode::kUnsupported,
               "tensor 't' has ggml type id 99");
  expect_error(one({"t", 8, {16, 2}, Bytes(68), std::nullopt}), ErrorCode::kInvalidFile,
               "row length 16 is not a multiple of the q8_0 block size 32");
  expect_error(one({"t", 0, {4}, four, uint64_t{1}}), ErrorCode::kInvalidFile,
               "data offset 1 is not a multiple of the alignment 32");
  expect_error(one({"blk.3.attn_q.weight", 0, {4}, four, uint64_t{4096}}), ErrorCode::kInvalidFile,
               "tensor 'blk.3.attn_q.weight': data [offset 4096, 16 bytes] extends past end of "
               "file");
  expect_error(one({"t", 0, {4}, four, ~uint64_t{31}}), ErrorCode::kInvalidFile,
               "extends past end of file");
  expect_error(one({"", 0, {4}, four, std::nullopt}), ErrorCode::kInvalidFile, "name is empty");
  GgufBuilder dup;
  dup.tensor("t", 0, {1}, testing::f32_bytes({1})).tensor("t", 0, {1}, testing::f32_bytes({2}));
  expect_error(dup.build(), ErrorCode::kInvalidFile, "tensor 't' appears twice");
}

// A header whose type or shape changed no longer matches the bytes laid out for the tensor:
// F32 -> F16 leaves half of them to no tensor, F16 -> F32 reads into the next tensor.
TEST(GgufHostile, DeclaredSizesMustTileTheData) {
  using Spec = GgufBuilder::TensorSpec;
  const Bytes f32_64 = testing::f32_bytes(std::vector<float>(64, 1.5f));  // 256 bytes
  const auto file = [&](uint32_t type_a, uint32_t type_b) {
    GgufBuilder g;
    g.kv_u32("x", 1);
    g.tensor_raw(Spec{"blk.0.attn_q.weight", type_a, {64}, f32_64, std::nullopt});
    g.tensor_raw(Spec{"output_norm.weight", type_b, {64}, f32_64, std::nullopt});
    return g.build();
  };
  Bytes keep;
  EXPECT_NO_THROW(parse_copy(file(0, 0), &keep));
  expect_error(file(1, 0), ErrorCode::kInvalidFile,
               "tensor 'blk.0.attn_q.weight': its type f16 and shape [64] make 128 bytes, but "
               "its data spans 256 bytes up to tensor 'output_norm.weight'");
  expect_error(file(0, 1), ErrorCode::kInvalidFile,
               "tensor 'output_norm.weight': its type f16 and shape [64] make 128 bytes, but its "
               "data spans 256 bytes up to the end of the file");
  // Declared larger than its slot: it would overlap the next tensor.
  GgufBuilder wide;
  wide.tensor_raw(Spec{"a", 0, {128}, f32_64, std::nullopt});
  wide.tensor_raw(Spec{"b", 0, {64}, f32_64, std::nullopt});
  expect_error(wide.build(), ErrorCode::kInvalidFile, "make 512 bytes, but its data spans 256");
  // Padding after the last tensor stays under the alignment; more is data nobody describes.
  Bytes padded = file(0, 0);
  padded.resize(padded.size() + 31, 0);
  EXPECT_NO_THROW(parse_copy(padded, &keep));
  padded.resize(padded.size() + 1, 0);
  expect_error(padded, ErrorCode::kInvalidFile, "spans 288 bytes up to the end of the file");
}

TEST(GgufHostile, BoolMustBeZeroOrOne) {
  Bytes keep;
  auto f = parse_copy(GgufBuilder()
                          .kv("b0", GgufValueType::kBool, uint8_t{0})
                          .kv("b2", GgufValueType::kBool, uint8_t{2})
                          .build(),
                      &keep);
  EXPECT_FALSE(f->get_bool("b0"));
  EXPECT_THROW(f->get_bool("b2"), Error);
}

}  // namespace
}  // namespace inflight
