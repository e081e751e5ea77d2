// GgufFile: a GGUF model or vocabulary file (versions 2 and 3), parsed in place.
//
// Layout (little-endian):
//   "GGUF" u32 version, u64 n_tensors, u64 n_kv,
//   n_kv x { string key, u32 value_type, value },
//   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset },
//   padding to `general.alignment` (default 32), then the data section.
// A string is u64 length + bytes (no terminator); an array is u32 element type, u64 count,
// elements (arrays may nest).
//
// Metadata values are not copied: the file keeps (offset, type) per key and the getters decode
// on demand, returning views into the mapping. Everything is bounds-checked once, at parse, so
// the getters cannot read past the end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/mmap_file.h"
#include "core/tensor.h"

namespace inflight {

enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8,
  kU16,
  kI16,
  kU32,
  kI32,
  kF32,
  kBool,
  kString,
  kArray,
  kU64,
  kI64,
  kF64
};

std::string_view gguf_value_type_name(GgufValueType t);

struct GgufTensorInfo {
  std::string name;
  uint32_t type;        // ggml type id (GgmlType in ggml_types.h)
  Shape shape;          // outermost first, i.e. reverse of GGUF's ne[] (ne[0] is innermost)
  uint64_t offset;      // relative to the data section
  const uint8_t* data;  // points into the mapping; bounds checked at open
  size_t nbytes;
};

class GgufFile {
 public:
  // Parses header, metadata and tensor infos with full bounds checks (v2 and v3; v1 rejected).
  // Throws Error(kNotFound / kInvalidFile / kUnsupported) naming the file and the key/tensor.
  static std::shared_ptr<GgufFile> open(const std::string& path);
  // NOTE: parse() does not copy: [data, data + size) must outlive the GgufFile.
  // `what` names the buffer in error messages (usually the file name).
  static std::shared_ptr<GgufFile> parse(const uint8_t* data, size_t size, std::string what);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }  // start of the data section in the file
  const std::string& what() const { return what_; }
  // The file mapping the tensors point into (null for parse()).
  const MmapFile* mapping() const { return file_.get(); }

  bool has(std::string_view key) const;
  GgufValueType type_of(std::string_view key) const;  // throws kNotFound naming key
  // For arrays: the element type and the number of elements (throws unless `key` is an array).
  GgufValueType array_type_of(std::string_view key) const;
  uint64_t array_size(std::string_view key) const;

  // Typed getters: throw Error(kNotFound / kInvalidFile) naming the key and what was found.
  std::string_view get_string(std::string_view key) const;  // view into the mapping
  int64_t get_int(std::string_view key) const;   // any integer type (u64 > INT64_MAX rejected)
  double get_float(std::string_view key) const;  // f32 or f64
  bool get_bool(std::string_view key) const;
  // Arrays. get_string_array returns views into the mapping (fast for 150k-token vocabs).
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;  // f32 or f64 elements
  std::vector<int64_t> get_int_array(std::string_view key) const;  // any integer elements
  // Defaults when absent (still throw when present with a wrong type):
  std::string_view get_string_or(std::string_view key, std::string_view fallback) const;
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;

  std::vector<std::string> keys() const;  // in file order
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr if absent

 private:
  // One metadata entry: where its value starts in the buffer, and its type.
  struct Entry {
    std::string_view key;  // view into the buffer
    GgufValueType type;
    size_t value_offset;  // scalar/string: the value; array: the first element
    GgufValueType elem_type = GgufValueType::kU8;  // arrays only
    uint64_t count = 0;                            // arrays only
  };
  class Parser;

  GgufFile() = default;
  GgufFile(const GgufFile&) = delete;  // views in index_/tensor_index_ point into members
  GgufFile& operator=(const GgufFile&) = delete;
  const Entry& entry(std::string_view key) const;  // throws kNotFound
  const Entry* find(std::string_view key) const;
  const Entry& array_entry(std::string_view key, const char* wanted) const;
  [[noreturn]] void wrong_type(const Entry& e, const char* wanted) const;

  std::shared_ptr<MmapFile> file_;  // keeps the mapping alive (null for parse())
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string what_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<Entry> entries_;                          // file order
  std::unordered_map<std::string_view, size_t> index_;  // key -> entries_ index
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;  // views of tensors_[i].name
};

}  // namespace inflight
