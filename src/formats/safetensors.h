// SafetensorsFile: one .safetensors file, parsed in place.
//
// Layout: u64 N (little-endian), N bytes of JSON header, then the data section. The header maps
// tensor names to {"dtype", "shape", "data_offsets": [begin, end)} (offsets relative to the data
// section) plus an optional "__metadata__" object of strings.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/mmap_file.h"
#include "core/tensor.h"
#include "formats/stored_tensor.h"

namespace inflight {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;    // as the file spells it: "F32", "BF16", "I64", ...
  Shape shape;          // row-major, outermost first (empty for a scalar)
  const uint8_t* data;  // points into the mapping; bounds checked at open
  size_t nbytes;        // == numel * dtype size
};

class SafetensorsFile {
 public:
  // Throws Error(kNotFound / kInvalidFile / kUnsupported) naming the file and tensor.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  // NOTE: no copy is made: [data, data + size) must outlive the SafetensorsFile.
  static std::shared_ptr<SafetensorsFile> parse(const uint8_t* data, size_t size, std::string what);

  const std::string& what() const { return what_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;  // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The file mapping the tensors point into (null for parse()).
  const MmapFile* mapping() const { return file_.get(); }

  // The tensor as stored (F32, F16, BF16, F8_E4M3, F8_E5M2, I8; others throw kUnsupported
  // naming the tensor). `owner` keeps the file alive.
  StoredTensor load_raw(const SafetensorsTensor& t, std::shared_ptr<const void> owner) const;

 private:
  SafetensorsFile() = default;
  void parse_header();

  std::shared_ptr<MmapFile> file_;  // keeps the mapping alive (null for parse())
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string what_;
  std::vector<SafetensorsTensor> tensors_;  // sorted by data offset
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Bytes per element of a safetensors dtype name, or 0 if unknown.
size_t safetensors_dtype_size(std::string_view dtype);

}  // namespace inflight
