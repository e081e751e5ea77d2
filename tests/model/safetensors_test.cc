// SafetensorsFile: headers built by hand (valid and hostile) and files from the `safetensors`
// Python package (fixtures/tiny_hf).
#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "file_builders.h"

namespace inflight {
namespace {

using testing::Bytes;

const std::string kFixtures = std::string(INFLIGHT_SOURCE_DIR) + "/tests/model/fixtures";

std::shared_ptr<SafetensorsFile> parse_copy(const Bytes& bytes, Bytes* keep) {
  *keep = bytes;
  return SafetensorsFile::parse(keep->data(), keep->size(), "test.safetensors");
}

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

// One f32 [2, 2], one bf16 [3], one f16 scalar, plus metadata.
Bytes valid_file() {
  Bytes data = testing::f32_bytes({1.0f, -2.0f, 3.5f, 4.0f});
  for (float v : {0.5f, -1.25f, 300.0f}) testing::put<uint16_t>(data, f32_to_bf16(v));
  testing::put<uint16_t>(data, f32_to_f16(-0.125f));
  const std::string header = R"({"__metadata__": {"format": "pt"},
    "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
    "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
    "s": {"dtype": "F16", "shape": [], "data_offsets": [22, 24]}})";
  return testing::safetensors_bytes(header, data);
}

Bytes one_tensor(const std::string& entry, size_t data_bytes = 16) {
  return testing::safetensors_bytes("{\"t\": " + entry + "}", Bytes(data_bytes, 0));
}

TEST(Safetensors, ParsesAndLoads) {
  Bytes keep;
  auto f = parse_copy(valid_file(), &keep);
  EXPECT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const SafetensorsTensor* w = f->find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (Shape{2, 2}));
  EXPECT_EQ(w->dtype, "F32");
  const Tensor tw = to_host_f32(f->load_raw(*w, nullptr));
  EXPECT_EQ(std::vector<float>(tw.data<float>(), tw.data<float>() + 4),
            (std::vector<float>{1.0f, -2.0f, 3.5f, 4.0f}));
  const Tensor tb = to_host_f32(f->load_raw(*f->find("b"), nullptr));
  EXPECT_EQ(tb.shape(), (Shape{3}));
  EXPECT_EQ(tb.data<float>()[1], -1.25f);
  EXPECT_EQ(tb.data<float>()[2], 300.0f);
  const Tensor ts = to_host_f32(f->load_raw(*f->find("s"), nullptr));
  EXPECT_EQ(ts.numel(), 1);
  EXPECT_EQ(ts.data<float>()[0], -0.125f);
  EXPECT_EQ(f->find("nope"), nullptr);
}

TEST(Safetensors, ReadsFilesFromPythonPackage) {
  auto f = SafetensorsFile::open(kFixtures + "/tiny_hf/model-00001-of-00002.safetensors");
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const SafetensorsTensor* t = f->find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (Shape{8, 8}));
  EXPECT_EQ(t->dtype, "F32");
  const SafetensorsTensor* h = f->find("model.layers.0.input_layernorm.weight");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->dtype, "F16");
}

TEST(Safetensors, OtherDtypesParseButDoNotLoad) {
  Bytes keep;
  auto f =
      parse_copy(one_tensor(R"({"dtype": "I64", "shape": [2], "data_offsets": [0, 16]})"), &keep);
  try {
    f->load_raw(f->tensors()[0], nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("tensor 't' has dtype I64"), std::string::npos);
  }
  expect_error(one_tensor(R"({"dtype": "F4", "shape": [2], "data_offsets": [0, 1]})"),
               ErrorCode::kUnsupported, "unknown dtype 'F4'");
}

TEST(SafetensorsHostile, EveryTruncationFails) {
  const Bytes full = valid_file();
  for (size_t n = 0; n < full.size(); ++n) {
    Bytes keep;
    EXPECT_THROW(parse_copy(Bytes(full.begin(), full.begin() + n), &keep), Error) << n;
  }
}

TEST(SafetensorsHostile, HeaderProblems) {
  Bytes huge;
  testing::put<uint64_t>(huge, uint64_t{1} << 60);
  huge.resize(64, ' ');
  expect_error(huge, ErrorCode::kInvalidFile, "header length 1152921504606846976");
  expect_error(testing::safetensors_bytes("{\"t\": ", {}), ErrorCode::kInvalidFile,
               "not valid JSON");
  expect_error(testing::safetensors_bytes("[1, 2]", {}), ErrorCode::kInvalidFile,
               "must be a JSON object");
  expect_error(testing::safetensors_bytes(R"({"__metadata__": {"a": 1}})", {}),
               ErrorCode::kInvalidFile, "__metadata__ value 'a'");
  expect_error(testing::safetensors_bytes(std::string(2000, '['), {}), ErrorCode::kInvalidFile,
               "not valid JSON");
}

TEST(SafetensorsHostile, BadTensorEntries) {
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [4]})"), ErrorCode::kInvalidFile,
               "tensor 't' needs an object");
  expect_error(one_tensor(R"({"dtype": 5, "shape": [4], "data_offsets": [0, 16]})"),
               ErrorCode::kInvalidFile, "dtype must be a string");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]})"),
               ErrorCode::kInvalidFile, "non-negative integer");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [4.0], "data_offsets": [0, 16]})"),
               ErrorCode::kInvalidFile, "non-negative integer");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [4], "data_offsets": [0, 17]})"),
               ErrorCode::kInvalidFile, "outside the data section");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [4], "data_offsets": [8, 4]})"),
               ErrorCode::kInvalidFile, "outside the data section");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [3], "data_offsets": [0, 16]})"),
               ErrorCode::kInvalidFile, "hold 16 bytes but shape [3] of F32 needs 12");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [4], "data_offsets": [0]})"),
               ErrorCode::kInvalidFile, "data_offsets must be [begin, end]");
  expect_error(
      one_tensor(R"({"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]})"),
      ErrorCode::kInvalidFile, "");
  expect_error(
      one_tensor(R"({"dtype": "F64", "shape": [2305843009213693952, 2], "data_offsets": [0, 16]})"),
      ErrorCode::kInvalidFile, "");
  expect_error(testing::safetensors_bytes(
                   R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                   Bytes(16, 0)),
               ErrorCode::kInvalidFile, "overlap");
}

// The format requires the data section to be covered exactly: no gaps, no overlaps, nothing
// after the last tensor (as the reference implementation checks).
TEST(SafetensorsHostile, TensorsMustCoverTheDataExactly) {
  const auto two = [](const char* b_offsets, size_t data_bytes) {
    return testing::safetensors_bytes(
        std::string(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                         "b": {"dtype": "F32", "shape": [2], "data_offsets": )") +
            b_offsets + "}}",
        Bytes(data_bytes, 0));
  };
  Bytes keep;
  EXPECT_NO_THROW(parse_copy(two("[8, 16]", 16), &keep));
  expect_error(two("[12, 20]", 20), ErrorCode::kInvalidFile,
               "4 bytes of the data section before tensor 'b' (at 12) belong to no tensor");
  expect_error(two("[8, 16]", 24), ErrorCode::kInvalidFile,
               "the tensors fill 16 bytes of the 24-byte data section (the last, 'b', ends at "
               "16)");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [4], "data_offsets": [4, 20]})", 20),
               ErrorCode::kInvalidFile, "4 bytes of the data section before tensor 't'");
  expect_error(two("[4, 12]", 16), ErrorCode::kInvalidFile,
               "tensors 'a' and 'b' overlap (bytes [0, 8) and [4, 12))");
  // A header that changed F32 to F16 without its offsets fails on the size already.
  expect_error(one_tensor(R"({"dtype": "F16", "shape": [4], "data_offsets": [0, 16]})"),
               ErrorCode::kInvalidFile, "hold 16 bytes but shape [4] of F16 needs 8");
  // Empty tensors take no bytes anywhere.
  EXPECT_NO_THROW(parse_copy(testing::safetensors_bytes(
                                 R"({"e": {"dtype": "F32", "shape": [0], "data_offsets": [3, 3]},
              "t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                                 Bytes(4, 0)),
                             &keep));
}

}  // namespace
}  // namespace inflight
