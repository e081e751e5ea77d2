// A read-only memory-mapped file. Model files are parsed in place through a ByteReader, which
// checks every read against the mapping's bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "core/check.h"

namespace inflight {

class MmapFile {
 public:
  // Maps `path` read-only. Throws Error(kNotFound / kInvalidFile) with the path in the message.
  static std::shared_ptr<MmapFile> open(const std::string& path);
  ~MmapFile();
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MmapFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Sequential little-endian reader over [data, data + size) with bounds checks. Every failure
// throws Error(kInvalidFile) naming `what` (the file) and the offset.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, std::string what)
      : data_(data), size_(size), what_(std::move(what)) {}

  size_t offset() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }
  void seek(size_t pos) {
    INFLIGHT_CHECK_CODE(pos <= size_, ErrorCode::kInvalidFile,
                        "{}: offset {} is past the end ({} bytes)", what_, pos, size_);
    pos_ = pos;
  }

  template <typename T>
  T read() {
    require(sizeof(T));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A view of the next n bytes.
  std::string_view bytes(size_t n) {
    require(n);
    std::string_view v(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return v;
  }

  void require(size_t n) const {
    INFLIGHT_CHECK_CODE(n <= size_ - pos_, ErrorCode::kInvalidFile,
                        "{}: truncated: need {} bytes at offset {}, {} left", what_, n, pos_,
                        size_ - pos_);
  }

  const std::string& what() const { return what_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace inflight
