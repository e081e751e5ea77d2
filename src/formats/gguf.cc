#include "formats/gguf.h"

#include <cstring>
#include <limits>

#include "formats/ggml_types.h"
#include "formats/gguf_parser.h"

namespace inflight {

std::string_view gguf_value_type_name(GgufValueType t) {
  static constexpr std::string_view kNames[] = {"u8",  "i8",  "u16",  "i16",    "u32",
                                                "i32", "f32", "bool", "string", "array",
                                                "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < std::size(kNames) ? kNames[i] : std::string_view("invalid");
}

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  auto file = MmapFile::open(path);
  auto gguf = parse(file->data(), file->size(), path);
  gguf->file_ = std::move(file);
  return gguf;
}

std::shared_ptr<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, std::string what) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->data_ = data;
  f->size_ = size;
  f->what_ = std::move(what);
  Parser(*f).run();
  return f;
}

// ---- lookups -------------------------------------------------------------------------------

const GgufFile::Entry* GgufFile::find(std::string_view key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const GgufFile::Entry& GgufFile::entry(std::string_view key) const {
  const Entry* e = find(key);
  INFLIGHT_CHECK_CODE(e != nullptr, ErrorCode::kNotFound, "{}: metadata key '{}' not found", what_,
                      key);
  return *e;
}

void GgufFile::wrong_type(const Entry& e, const char* wanted) const {
  std::string found(gguf_value_type_name(e.type));
  if (e.type == GgufValueType::kArray) {
    found = fmt::format("array of {} {}", e.count, gguf_value_type_name(e.elem_type));
  }
  INFLIGHT_THROW(ErrorCode::kInvalidFile, "{}: metadata key '{}' should be {}, found {}", what_,
                 e.key, wanted, found);
}

bool GgufFile::has(std::string_view key) const {
  return find(key) != nullptr;
}

GgufValueType GgufFile::type_of(std::string_view key) const {
  return entry(key).type;
}

const GgufFile::Entry& GgufFile::array_entry(std::string_view key, const char* wanted) const {
  const Entry& e = entry(key);
  if (e.type != GgufValueType::kArray) wrong_type(e, wanted);
  return e;
}

GgufValueType GgufFile::array_type_of(std::string_view key) const {
  return array_entry(key, "an array").elem_type;
}

uint64_t GgufFile::array_size(std::string_view key) const {
  return array_entry(key, "an array").count;
}

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) out.emplace_back(e.key);
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

// ---- scalar getters ------------------------------------------------------------------------

namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

bool is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kU16:
    case GgufValueType::kI16:
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kU64:
    case GgufValueType::kI64:
      return true;
    default:
      return false;
  }
}

// An integer of type t at p; false when a u64 does not fit in int64.
bool load_int(GgufValueType t, const uint8_t* p, int64_t* out) {
  switch (t) {
    case GgufValueType::kU8:
      *out = load<uint8_t>(p);
      return true;
    case GgufValueType::kI8:
      *out = load<int8_t>(p);
      return true;
    case GgufValueType::kU16:
      *out = load<uint16_t>(p);
      return true;
    case GgufValueType::kI16:
      *out = load<int16_t>(p);
      return true;
    case GgufValueType::kU32:
      *out = load<uint32_t>(p);
      return true;
    case GgufValueType::kI32:
      *out = load<int32_t>(p);
      return true;
    case GgufValueType::kI64:
      *out = load<int64_t>(p);
      return true;
    case GgufValueType::kU64: {
      const auto v = load<uint64_t>(p);
      *out = static_cast<int64_t>(v);
      return v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    }
    default:
      return false;
  }
}

}  // namespace

std::string_view GgufFile::get_string(std::string_view key) const {
  const Entry& e = entry(key);
  if (e.type != GgufValueType::kString) wrong_type(e, "a string");
  const auto len = load<uint64_t>(data_ + e.value_offset);  // bounds checked at parse
  return {reinterpret_cast<const char*>(data_ + e.value_offset + 8), static_cast<size_t>(len)};
}

int64_t GgufFile::get_int(std::string_view key) const {
  const Entry& e = entry(key);
  if (!is_integer(e.type)) wrong_type(e, "an integer");
  int64_t v = 0;
  INFLIGHT_CHECK_CODE(load_int(e.type, data_ + e.value_offset, &v), ErrorCode::kInvalidFile,
                      "{}: metadata key '{}': u64 value {} does not fit in int64", what_, key,
                      load<uint64_t>(data_ + e.value_offset));
  return v;
}

double GgufFile::get_float(std::string_view key) const {
  const Entry& e = entry(key);
  if (e.type == GgufValueType::kF32) return load<float>(data_ + e.value_offset);
  if (e.type == GgufValueType::kF64) return load<double>(data_ + e.value_offset);
  wrong_type(e, "a float (f32 or f64)");
}

bool GgufFile::get_bool(std::string_view key) const {
  const Entry& e = entry(key);
  if (e.type != GgufValueType::kBool) wrong_type(e, "a bool");
  const uint8_t v = data_[e.value_offset];
  INFLIGHT_CHECK_CODE(v <= 1, ErrorCode::kInvalidFile,
                      "{}: metadata key '{}': bool byte is {}, not 0 or 1", what_, key, v);
  return v == 1;
}

std::string_view GgufFile::get_string_or(std::string_view key, std::string_view fallback) const {
  return has(key) ? get_string(key) : fallback;
}
int64_t GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double GgufFile::get_float_or(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}

// ---- array getters -------------------------------------------------------------------------

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const Entry& e = array_entry(key, "an array of strings");
  if (e.elem_type != GgufValueType::kString) wrong_type(e, "an array of strings");
  std::vector<std::string_view> out;
  out.reserve(e.count);
  size_t pos = e.value_offset;
  for (uint64_t i = 0; i < e.count; ++i) {  // lengths were bounds checked at parse
    const auto len = static_cast<size_t>(load<uint64_t>(data_ + pos));
    out.emplace_back(reinterpret_cast<const char*>(data_ + pos + 8), len);
    pos += 8 + len;
  }
  return out;
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const Entry& e = array_entry(key, "an array of floats");
  std::vector<float> out(e.count);
  const uint8_t* p = data_ + e.value_offset;
  if (e.elem_type == GgufValueType::kF32) {
    if (e.count) std::memcpy(out.data(), p, e.count * 4);
  } else if (e.elem_type == GgufValueType::kF64) {
    for (uint64_t i = 0; i < e.count; ++i) out[i] = static_cast<float>(load<double>(p + 8 * i));
  } else {
    wrong_type(e, "an array of floats (f32 or f64)");
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const Entry& e = array_entry(key, "an array of integers");
  if (!is_integer(e.elem_type)) wrong_type(e, "an array of integers");
  const size_t elem = gguf_scalar_size(e.elem_type);
  std::vector<int64_t> out(e.count);
  for (uint64_t i = 0; i < e.count; ++i) {
    INFLIGHT_CHECK_CODE(load_int(e.elem_type, data_ + e.value_offset + i * elem, &out[i]),
                        ErrorCode::kInvalidFile,
                        "{}: metadata key '{}': element {} does not fit in int64", what_, key, i);
  }
  return out;
}

}  // namespace inflight
