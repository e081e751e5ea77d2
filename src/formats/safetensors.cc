#include "formats/safetensors.h"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "formats/ggml_types.h"

namespace inflight {
namespace {

// The reference implementation refuses headers above 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

using json = nlohmann::json;

// A non-negative integer from a JSON value, or throws naming `context`.
uint64_t as_u64(const json& v, const std::string& what, std::string_view context) {
  INFLIGHT_CHECK_CODE(v.is_number_unsigned(), ErrorCode::kInvalidFile,
                      "{}: {} must be a non-negative integer, found {}", what, context, v.dump());
  return v.get<uint64_t>();
}

}  // namespace

size_t safetensors_dtype_size(std::string_view dtype) {
  static constexpr std::pair<std::string_view, size_t> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8},
  };
  for (const auto& [name, size] : kSizes) {
    if (name == dtype) return size;
  }
  return 0;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto file = MmapFile::open(path);
  auto st = parse(file->data(), file->size(), path);
  st->file_ = std::move(file);
  return st;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size,
                                                        std::string what) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->data_ = data;
  f->size_ = size;
  f->what_ = std::move(what);
  f->parse_header();
  return f;
}

void SafetensorsFile::parse_header() {
  ByteReader r(data_, size_, what_);
  const auto header_len = r.read<uint64_t>();
  INFLIGHT_CHECK_CODE(header_len <= r.remaining() && header_len <= kMaxHeaderBytes,
                      ErrorCode::kInvalidFile,
                      "{}: header length {} exceeds the file ({} bytes after the length) or the "
                      "{}-byte limit",
                      what_, header_len, r.remaining(), kMaxHeaderBytes);
  const std::string_view text = r.bytes(static_cast<size_t>(header_len));
  const uint8_t* base = data_ + r.offset();
  const uint64_t data_size = r.remaining();

  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    INFLIGHT_THROW(ErrorCode::kInvalidFile, "{}: header is not valid JSON: {}", what_, e.what());
  }
  INFLIGHT_CHECK_CODE(header.is_object(), ErrorCode::kInvalidFile,
                      "{}: header must be a JSON object", what_);

  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      INFLIGHT_CHECK_CODE(v.is_object(), ErrorCode::kInvalidFile,
                          "{}: __metadata__ must be an object of strings", what_);
      for (const auto& [k, s] : v.items()) {
        INFLIGHT_CHECK_CODE(s.is_string(), ErrorCode::kInvalidFile,
                            "{}: __metadata__ value '{}' must be a string", what_, k);
        metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    const std::string ctx = fmt::format("tensor '{}'", name);
    INFLIGHT_CHECK_CODE(
        v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
        ErrorCode::kInvalidFile, "{}: {} needs an object with dtype, shape and data_offsets", what_,
        ctx);
    const json& dtype = v["dtype"];
    const json& shape = v["shape"];
    const json& offsets = v["data_offsets"];
    INFLIGHT_CHECK_CODE(dtype.is_string(), ErrorCode::kInvalidFile,
                        "{}: {}: dtype must be a string", what_, ctx);
    SafetensorsTensor t{name, dtype.get<std::string>(), {}, nullptr, 0};
    const size_t elem = safetensors_dtype_size(t.dtype);
    INFLIGHT_CHECK_CODE(elem != 0, ErrorCode::kUnsupported, "{}: {}: unknown dtype '{}'", what_,
                        ctx, t.dtype);
    INFLIGHT_CHECK_CODE(shape.is_array() && shape.size() <= 8, ErrorCode::kInvalidFile,
                        "{}: {}: shape must be an array of at most 8 integers", what_, ctx);
    uint64_t numel = 1;
    for (const json& d : shape) {
      const uint64_t n = as_u64(d, what_, ctx + " shape");
      INFLIGHT_CHECK_CODE(n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
                              !__builtin_mul_overflow(numel, n, &numel),
                          ErrorCode::kInvalidFile, "{}: {}: element count overflows", what_, ctx);
      t.shape.push_back(static_cast<int64_t>(n));
    }
    INFLIGHT_CHECK_CODE(offsets.is_array() && offsets.size() == 2, ErrorCode::kInvalidFile,
                        "{}: {}: data_offsets must be [begin, end]", what_, ctx);
    const uint64_t begin = as_u64(offsets[0], what_, ctx + " data_offsets");
    const uint64_t end = as_u64(offsets[1], what_, ctx + " data_offsets");
    INFLIGHT_CHECK_CODE(begin <= end && end <= data_size, ErrorCode::kInvalidFile,
                        "{}: {}: data_offsets [{}, {}) are outside the data section ({} bytes)",
                        what_, ctx, begin, end, data_size);
    uint64_t expected = 0;
    INFLIGHT_CHECK_CODE(!__builtin_mul_overflow(numel, elem, &expected) && expected == end - begin,
                        ErrorCode::kInvalidFile,
                        "{}: {}: data_offsets [{}, {}) hold {} bytes but shape {} of {} needs {}",
                        what_, ctx, begin, end, end - begin, shape_str(t.shape), t.dtype,
                        numel * elem);
    t.data = base + begin;
    t.nbytes = static_cast<size_t>(end - begin);
    tensors_.push_back(std::move(t));
  }

  // The format requires the tensors to cover the data section exactly, as the reference
  // implementation checks: in offset order each (non-empty) tensor begins where the previous
  // one ended, and the last ends at the end of the file. An overlap would let one tensor's
  // bytes be read as another's; a gap means the header and the data disagree.
  std::sort(tensors_.begin(), tensors_.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
              return a.data != b.data ? a.data < b.data : a.nbytes < b.nbytes;
            });
  uint64_t covered = 0;  // bytes of the data section the tensors so far fill
  const SafetensorsTensor* previous = nullptr;
  for (const SafetensorsTensor& t : tensors_) {
    if (t.nbytes == 0) continue;
    const auto begin = static_cast<uint64_t>(t.data - base);
    INFLIGHT_CHECK_CODE(begin >= covered, ErrorCode::kInvalidFile,
                        "{}: tensors '{}' and '{}' overlap (bytes [{}, {}) and [{}, {}))", what_,
                        previous != nullptr ? previous->name : "", t.name,
                        previous != nullptr ? static_cast<uint64_t>(previous->data - base) : 0,
                        covered, begin, begin + t.nbytes);
    INFLIGHT_CHECK_CODE(begin == covered, ErrorCode::kInvalidFile,
                        "{}: {} bytes of the data section before tensor '{}' (at {}) belong to no "
                        "tensor",
                        what_, begin - covered, t.name, begin);
    covered = begin + t.nbytes;
    previous = &t;
  }
  INFLIGHT_CHECK_CODE(covered == data_size, ErrorCode::kInvalidFile,
                      "{}: the tensors fill {} bytes of the {}-byte data section{}: the header "
                      "does not describe the data",
                      what_, covered, data_size,
                      previous != nullptr
                          ? fmt::format(" (the last, '{}', ends at {})", previous->name, covered)
                          : std::string());
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

StoredTensor SafetensorsFile::load_raw(const SafetensorsTensor& t,
                                       std::shared_ptr<const void> owner) const {
  static constexpr std::pair<std::string_view, StoredType> kTypes[] = {
      {"F32", StoredType::kF32},        {"F16", StoredType::kF16},
      {"BF16", StoredType::kBF16},      {"F8_E4M3", StoredType::kF8E4M3},
      {"F8_E5M2", StoredType::kF8E5M2}, {"I8", StoredType::kI8}};
  StoredTensor s;
  const auto it = std::find_if(std::begin(kTypes), std::end(kTypes),
                               [&](const auto& e) { return e.first == t.dtype; });
  INFLIGHT_CHECK_CODE(it != std::end(kTypes), ErrorCode::kUnsupported,
                      "{}: tensor '{}' has dtype {}; weights can be F32, F16, BF16, F8_E4M3, "
                      "F8_E5M2 or I8",
                      what_, t.name, t.dtype);
  s.name = t.name;
  s.shape = t.shape;
  s.type = it->second;
  s.data = t.data;
  s.owner = std::move(owner);
  s.file = file_.get();
  return s;
}

}  // namespace inflight
