#include "formats/gguf_parser.h"

#include <algorithm>
#include <limits>

#include "formats/ggml_types.h"

namespace inflight {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr size_t kMaxKeyBytes = 65535;
constexpr size_t kMaxTensorNameBytes = 65535;
constexpr int kMaxArrayDepth = 4;  // arrays of arrays nest at most this deep
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;
// Smallest encodings, to reject absurd counts before looping or allocating:
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;              // key len, 1-byte key, type, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 4 + 8;  // name, n_dims, type, offset
constexpr uint64_t kMinArrayBytes = 4 + 8;                   // element type + count

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    unsigned lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (end - p <= n) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (int i = 2; i <= n; ++i) {
      if ((p[i] & 0xc0) != 0x80) return false;
    }
    p += n + 1;
  }
  return true;
}

}  // namespace

size_t gguf_scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    default:
      return 0;
  }
}

void GgufFile::Parser::run() {
  read_header();
  read_metadata();
  read_alignment();
  read_tensor_infos();
  place_tensors();
}

void GgufFile::Parser::read_header() {
  const std::string& what = f_.what_;
  INFLIGHT_CHECK_CODE(r_.size() >= 4, ErrorCode::kInvalidFile,
                      "{}: not a GGUF file ({} bytes, too short for the magic)", what, r_.size());
  const auto magic = r_.read<uint32_t>();
  INFLIGHT_CHECK_CODE(magic == kMagic, ErrorCode::kInvalidFile,
                      "{}: not a GGUF file (magic 0x{:08x}, expected 0x{:08x} \"GGUF\")", what,
                      magic, kMagic);
  const auto version = r_.read<uint32_t>();
  INFLIGHT_CHECK_CODE(version != 0x02000000 && version != 0x03000000, ErrorCode::kUnsupported,
                      "{}: big-endian GGUF files are not supported", what);
  INFLIGHT_CHECK_CODE(version != 1, ErrorCode::kUnsupported,
                      "{}: GGUF version 1 is not supported; re-convert the model with a current "
                      "llama.cpp",
                      what);
  INFLIGHT_CHECK_CODE(version == 2 || version == 3, ErrorCode::kUnsupported,
                      "{}: GGUF version {} is not supported (only 2 and 3)", what, version);
  f_.version_ = version;
  num_tensors_ = r_.read<uint64_t>();
  num_kv_ = r_.read<uint64_t>();
  INFLIGHT_CHECK_CODE(num_kv_ <= r_.remaining() / kMinKvBytes, ErrorCode::kInvalidFile,
                      "{}: header claims {} metadata entries but only {} bytes follow", what,
                      num_kv_, r_.remaining());
  INFLIGHT_CHECK_CODE(num_tensors_ <= r_.remaining() / kMinTensorInfoBytes, ErrorCode::kInvalidFile,
                      "{}: header claims {} tensors but only {} bytes follow", what, num_tensors_,
                      r_.remaining());
}

std::string_view GgufFile::Parser::read_string(std::string_view context) {
  const auto len = r_.read<uint64_t>();
  INFLIGHT_CHECK_CODE(len <= r_.remaining(), ErrorCode::kInvalidFile,
                      "{}: {}: string of {} bytes at offset {} extends past the end ({} left)",
                      f_.what_, context, len, r_.offset() - 8, r_.remaining());
  return r_.bytes(static_cast<size_t>(len));
}

GgufValueType GgufFile::Parser::read_type(std::string_view context) {
  const auto t = r_.read<uint32_t>();
  INFLIGHT_CHECK_CODE(t <= static_cast<uint32_t>(GgufValueType::kF64), ErrorCode::kInvalidFile,
                      "{}: {}: invalid value type {} at offset {}", f_.what_, context, t,
                      r_.offset() - 4);
  return static_cast<GgufValueType>(t);
}

void GgufFile::Parser::skip_array(GgufValueType elem, uint64_t count, std::string_view context,
                                  int depth) {
  INFLIGHT_CHECK_CODE(depth < kMaxArrayDepth, ErrorCode::kInvalidFile,
                      "{}: {}: arrays nested deeper than {}", f_.what_, context, kMaxArrayDepth);
  const size_t scalar = gguf_scalar_size(elem);
  const uint64_t min_elem = scalar ? scalar : elem == GgufValueType::kString ? 8 : kMinArrayBytes;
  INFLIGHT_CHECK_CODE(count <= r_.remaining() / min_elem, ErrorCode::kInvalidFile,
                      "{}: {}: array of {} {} needs at least {} bytes, {} left", f_.what_, context,
                      count, gguf_value_type_name(elem), min_elem, r_.remaining());
  if (scalar) {
    r_.bytes(static_cast<size_t>(count * scalar));
    return;
  }
  for (uint64_t i = 0; i < count; ++i) skip_value(elem, context, depth);
}

void GgufFile::Parser::skip_value(GgufValueType t, std::string_view context, int depth) {
  if (const size_t n = gguf_scalar_size(t)) {
    r_.bytes(n);
  } else if (t == GgufValueType::kString) {
    read_string(context);
  } else {
    const GgufValueType elem = read_type(context);
    const auto count = r_.read<uint64_t>();
    skip_array(elem, count, context, depth + 1);
  }
}

void GgufFile::Parser::read_metadata() {
  const std::string& what = f_.what_;
  // NOTE: grow as entries actually parse; a count can still promise far more than exists.
  f_.entries_.reserve(static_cast<size_t>(std::min<uint64_t>(num_kv_, 1024)));
  for (uint64_t i = 0; i < num_kv_; ++i) {
    const std::string index_context = fmt::format("metadata entry #{}", i);
    const std::string_view key = read_string(index_context);
    INFLIGHT_CHECK_CODE(!key.empty() && key.size() <= kMaxKeyBytes, ErrorCode::kInvalidFile,
                        "{}: {}: key length {} is not in [1, {}]", what, index_context, key.size(),
                        kMaxKeyBytes);
    INFLIGHT_CHECK_CODE(is_valid_utf8(key), ErrorCode::kInvalidFile,
                        "{}: {}: key is not valid UTF-8", what, index_context);
    INFLIGHT_CHECK_CODE(!f_.index_.count(key), ErrorCode::kInvalidFile,
                        "{}: metadata key '{}' appears twice", what, key);
    const std::string context = fmt::format("metadata key '{}'", key);
    Entry e{key, read_type(context), 0};
    if (e.type == GgufValueType::kArray) {
      e.elem_type = read_type(context);
      e.count = r_.read<uint64_t>();
      e.value_offset = r_.offset();
      skip_array(e.elem_type, e.count, context, 1);
    } else {
      e.value_offset = r_.offset();
      skip_value(e.type, context, 0);
    }
    f_.index_.emplace(key, f_.entries_.size());
    f_.entries_.push_back(e);
  }
}

void GgufFile::Parser::read_alignment() {
  if (!f_.has("general.alignment")) return;
  const int64_t a = f_.get_int("general.alignment");
  INFLIGHT_CHECK_CODE(a > 0 && static_cast<uint64_t>(a) <= kMaxAlignment && (a & (a - 1)) == 0,
                      ErrorCode::kInvalidFile,
                      "{}: general.alignment is {}; it must be a power of two up to {}", f_.what_,
                      a, kMaxAlignment);
  f_.alignment_ = static_cast<uint32_t>(a);
}

void GgufFile::Parser::read_tensor_infos() {
  const std::string& what = f_.what_;
  INFLIGHT_CHECK_CODE(num_tensors_ <= r_.remaining() / kMinTensorInfoBytes, ErrorCode::kInvalidFile,
                      "{}: header claims {} tensors but only {} bytes of tensor infos follow", what,
                      num_tensors_, r_.remaining());
  // NOTE: grow as infos actually parse; the count alone may still promise more than exists.
  f_.tensors_.reserve(static_cast<size_t>(std::min<uint64_t>(num_tensors_, 4096)));
  for (uint64_t i = 0; i < num_tensors_; ++i) {
    const std::string index_context = fmt::format("tensor #{}", i);
    const std::string_view name = read_string(index_context);
    INFLIGHT_CHECK_CODE(!name.empty() && name.size() <= kMaxTensorNameBytes && is_valid_utf8(name),
                        ErrorCode::kInvalidFile,
                        "{}: {}: name is empty, longer than {} bytes or not valid UTF-8", what,
                        index_context, kMaxTensorNameBytes);
    GgufTensorInfo t{std::string(name), 0, {}, 0, nullptr, 0};
    const auto n_dims = r_.read<uint32_t>();
    INFLIGHT_CHECK_CODE(n_dims >= 1 && n_dims <= kMaxDims, ErrorCode::kInvalidFile,
                        "{}: tensor '{}': {} dimensions (must be 1 to {})", what, name, n_dims,
                        kMaxDims);
    t.shape.resize(n_dims);
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = r_.read<uint64_t>();
      const auto max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      INFLIGHT_CHECK_CODE(ne > 0 && ne <= max, ErrorCode::kInvalidFile,
                          "{}: tensor '{}': dimension ne[{}] = {} is invalid", what, name, d, ne);
      t.shape[n_dims - 1 - d] = static_cast<int64_t>(ne);  // outermost first
      INFLIGHT_CHECK_CODE(!__builtin_mul_overflow(numel, static_cast<int64_t>(ne), &numel),
                          ErrorCode::kInvalidFile, "{}: tensor '{}': element count overflows", what,
                          name);
    }
    t.type = r_.read<uint32_t>();
    const GgmlTypeTraits* traits = ggml_type_traits(t.type);
    INFLIGHT_CHECK_CODE(traits != nullptr, ErrorCode::kUnsupported,
                        "{}: tensor '{}' has ggml type id {}, which this build does not know", what,
                        name, t.type);
    const int64_t ne0 = t.shape.back();
    INFLIGHT_CHECK_CODE(ne0 % traits->block_size == 0, ErrorCode::kInvalidFile,
                        "{}: tensor '{}': row length {} is not a multiple of the {} block size {}",
                        what, name, ne0, traits->name, traits->block_size);
    const uint64_t num_blocks = static_cast<uint64_t>(numel / traits->block_size);
    INFLIGHT_CHECK_CODE(
        num_blocks <= std::numeric_limits<size_t>::max() / static_cast<uint64_t>(traits->type_size),
        ErrorCode::kInvalidFile, "{}: tensor '{}': byte size overflows", what, name);
    t.nbytes = static_cast<size_t>(num_blocks * static_cast<uint64_t>(traits->type_size));
    t.offset = r_.read<uint64_t>();
    INFLIGHT_CHECK_CODE(t.offset % f_.alignment_ == 0, ErrorCode::kInvalidFile,
                        "{}: tensor '{}': data offset {} is not a multiple of the alignment {}",
                        what, name, t.offset, f_.alignment_);
    f_.tensors_.push_back(std::move(t));
  }
}

void GgufFile::Parser::place_tensors() {
  const std::string& what = f_.what_;
  const uint64_t align = f_.alignment_;
  const uint64_t end_of_infos = r_.offset();
  // The data section starts at the next multiple of the alignment (cannot overflow: the offset
  // is at most the buffer size and the alignment at most 2^30).
  f_.data_offset_ = static_cast<size_t>((end_of_infos + align - 1) / align * align);
  const uint64_t size = f_.size_;
  for (size_t i = 0; i < f_.tensors_.size(); ++i) {
    GgufTensorInfo& t = f_.tensors_[i];
    const uint64_t base = f_.data_offset_;
    const bool fits = base <= size && t.offset <= size - base && t.nbytes <= size - base - t.offset;
    INFLIGHT_CHECK_CODE(fits, ErrorCode::kInvalidFile,
                        "{}: tensor '{}': data [offset {}, {} bytes] extends past end of file "
                        "(size {}, data section at {})",
                        what, t.name, t.offset, t.nbytes, size, base);
    t.data = f_.data_ + base + t.offset;
  }
  check_tensors_tile_the_data();
  // Built last: the views point at names that no longer move.
  f_.tensor_index_.reserve(f_.tensors_.size());
  for (size_t i = 0; i < f_.tensors_.size(); ++i) {
    const bool inserted = f_.tensor_index_.emplace(f_.tensors_[i].name, i).second;
    INFLIGHT_CHECK_CODE(inserted, ErrorCode::kInvalidFile, "{}: tensor '{}' appears twice", what,
                        f_.tensors_[i].name);
  }
}

void GgufFile::Parser::check_tensors_tile_the_data() const {
  // Writers (llama.cpp, gguf-py) lay the tensors out back to back, each padded to the
  // alignment, the last one too. So in offset order each tensor's declared bytes (type x shape)
  // must end before the next tensor begins, less than one alignment before it, and the last
  // one less than one alignment before the end of the file. A header whose type or shape was
  // changed (F32 -> F16 halves the size) no longer matches its data and is refused here.
  const std::string& what = f_.what_;
  const uint64_t align = f_.alignment_;
  const uint64_t data_bytes = f_.size_ - f_.data_offset_;  // place_tensors checked base <= size
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(f_.tensors_.size());
  for (const GgufTensorInfo& t : f_.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const GgufTensorInfo& t = *by_offset[i];
    const bool last = i + 1 == by_offset.size();
    // The bytes from this tensor's start to the next one's (or to the end of the file).
    const uint64_t span = (last ? data_bytes : by_offset[i + 1]->offset) - t.offset;
    INFLIGHT_CHECK_CODE(t.nbytes <= span && span - t.nbytes < align, ErrorCode::kInvalidFile,
                        "{}: tensor '{}': its type {} and shape {} make {} bytes, but its data "
                        "spans {} bytes up to {} (with alignment {}): the header does not match "
                        "the data",
                        what, t.name, ggml_type_name(t.type), shape_str(t.shape), t.nbytes, span,
                        last ? std::string("the end of the file")
                             : fmt::format("tensor '{}'", by_offset[i + 1]->name),
                        align);
  }
}

}  // namespace inflight
