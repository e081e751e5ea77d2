// Test helpers that write small GGUF and safetensors files byte by byte, with knobs to produce
// the malformed variants the parsers must reject.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "formats/gguf.h"

namespace inflight::testing {

using Bytes = std::vector<uint8_t>;

template <typename T>
void put(Bytes& b, T v) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  for (uint8_t x : raw) b.push_back(x);
}

inline void put_str(Bytes& b, std::string_view s) {
  put<uint64_t>(b, s.size());
  for (char c : s) b.push_back(static_cast<uint8_t>(c));
}

inline Bytes f32_bytes(const std::vector<float>& v) {
  Bytes b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

class GgufBuilder {
 public:
  struct TensorSpec {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> ne;  // GGUF order: ne[0] innermost
    Bytes data;
    std::optional<uint64_t> offset;  // overrides the computed (aligned) offset
  };

  uint32_t version = 3;
  std::optional<uint64_t> num_tensors;  // override the header counts
  std::optional<uint64_t> num_kv;
  uint32_t alignment = 32;  // used for layout; write general.alignment yourself to change it

  // A scalar: value bytes appended after key and type.
  template <typename T>
  GgufBuilder& kv(std::string_view key, GgufValueType type, T value) {
    Bytes b;
    put_str(b, key);
    put<uint32_t>(b, static_cast<uint32_t>(type));
    put<T>(b, value);
    kvs_.push_back(std::move(b));
    return *this;
  }
  GgufBuilder& kv_u32(std::string_view key, uint32_t v) { return kv(key, GgufValueType::kU32, v); }
  GgufBuilder& kv_f32(std::string_view key, float v) { return kv(key, GgufValueType::kF32, v); }
  GgufBuilder& kv_str(std::string_view key, std::string_view v) {
    Bytes b;
    put_str(b, key);
    put<uint32_t>(b, static_cast<uint32_t>(GgufValueType::kString));
    put_str(b, v);
    kvs_.push_back(std::move(b));
    return *this;
  }
  GgufBuilder& kv_str_array(std::string_view key, const std::vector<std::string>& v) {
    Bytes b;
    put_str(b, key);
    put<uint32_t>(b, static_cast<uint32_t>(GgufValueType::kArray));
    put<uint32_t>(b, static_cast<uint32_t>(GgufValueType::kString));
    put<uint64_t>(b, v.size());
    for (const auto& s : v) put_str(b, s);
    kvs_.push_back(std::move(b));
    return *this;
  }
  // Raw bytes after the key (type and value encoded by the caller).
  GgufBuilder& kv_raw(std::string_view key, const Bytes& type_and_value) {
    Bytes b;
    put_str(b, key);
    b.insert(b.end(), type_and_value.begin(), type_and_value.end());
    kvs_.push_back(std::move(b));
    return *this;
  }

  // `shape` outermost first, like GgufTensorInfo::shape.
  GgufBuilder& tensor(std::string name, uint32_t type, const Shape& shape, Bytes data) {
    std::vector<uint64_t> ne(shape.rbegin(), shape.rend());
    tensors_.push_back({std::move(name), type, std::move(ne), std::move(data), std::nullopt});
    return *this;
  }
  GgufBuilder& tensor_raw(TensorSpec spec) {
    tensors_.push_back(std::move(spec));
    return *this;
  }

  Bytes build() const {
    Bytes b = {'G', 'G', 'U', 'F'};
    put<uint32_t>(b, version);
    put<uint64_t>(b, num_tensors.value_or(tensors_.size()));
    put<uint64_t>(b, num_kv.value_or(kvs_.size()));
    for (const Bytes& kv : kvs_) b.insert(b.end(), kv.begin(), kv.end());
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const TensorSpec& t : tensors_) {
      offsets.push_back(t.offset.value_or(next));
      next = (offsets.back() + t.data.size() + alignment - 1) / alignment * alignment;
      put_str(b, t.name);
      put<uint32_t>(b, static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) put<uint64_t>(b, d);
      put<uint32_t>(b, t.type);
      put<uint64_t>(b, offsets.back());
    }
    const size_t data_start = (b.size() + alignment - 1) / alignment * alignment;
    b.resize(data_start, 0);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const TensorSpec& t = tensors_[i];
      if (t.offset) continue;  // overridden offsets are for invalid files: no data written
      b.resize(std::max<size_t>(b.size(), data_start + offsets[i]), 0);
      b.insert(b.end(), t.data.begin(), t.data.end());
    }
    return b;
  }

 private:
  std::vector<Bytes> kvs_;
  std::vector<TensorSpec> tensors_;
};

// A safetensors file from a raw header string and data section.
inline Bytes safetensors_bytes(const std::string& header, const Bytes& data) {
  Bytes b;
  put<uint64_t>(b, header.size());
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

inline void write_file(const std::filesystem::path& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

inline void write_text(const std::filesystem::path& path, const std::string& s) {
  std::ofstream out(path, std::ios::binary);
  out << s;
}

}  // namespace inflight::testing
