// GgufFile::Parser: the one pass over a GGUF buffer that validates everything the getters later
// rely on. Private to gguf.cc / gguf_parser.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/mmap_file.h"
#include "formats/gguf.h"

namespace inflight {

// Bytes of one scalar of type t; 0 for string and array.
size_t gguf_scalar_size(GgufValueType t);

class GgufFile::Parser {
 public:
  explicit Parser(GgufFile& f) : f_(f), r_(f.data_, f.size_, f.what_) {}
  void run();

 private:
  void read_header();
  void read_metadata();
  void read_alignment();
  void read_tensor_infos();
  void place_tensors();
  // In offset order the tensors' declared sizes fill the data section up to the padding.
  void check_tensors_tile_the_data() const;

  // A u64-length-prefixed string, its length checked against the bytes left.
  std::string_view read_string(std::string_view context);
  GgufValueType read_type(std::string_view context);
  // Skips (validating) one value of type t; `depth` counts enclosing arrays.
  void skip_value(GgufValueType t, std::string_view context, int depth);
  // Skips an array body (element type and count already read).
  void skip_array(GgufValueType elem, uint64_t count, std::string_view context, int depth);

  GgufFile& f_;
  ByteReader r_;
  uint64_t num_tensors_ = 0;
  uint64_t num_kv_ = 0;
};

}  // namespace inflight
