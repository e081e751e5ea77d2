#include "core/mmap_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "test_data.h"

namespace inflight {
namespace {

TEST(MmapFile, MapsAndReadsWithBoundsChecks) {
  auto dir = testing::scratch_dir("mmap");
  const auto path = (dir / "f.bin").string();
  {
    std::ofstream out(path, std::ios::binary);
    const uint32_t v = 0xdeadbeef;
    out.write(reinterpret_cast<const char*>(&v), 4);
    out.write("xy", 2);
  }
  auto f = MmapFile::open(path);
  ASSERT_EQ(f->size(), 6u);
  ByteReader r(f->data(), f->size(), path);
  EXPECT_EQ(r.read<uint32_t>(), 0xdeadbeefu);
  EXPECT_EQ(r.bytes(2), "xy");
  EXPECT_THROW(r.read<uint8_t>(), Error);
  EXPECT_THROW(r.seek(7), Error);
}

TEST(MmapFile, MissingFileIsNotFound) {
  try {
    MmapFile::open("/nonexistent/model.gguf");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
}

}  // namespace
}  // namespace inflight
