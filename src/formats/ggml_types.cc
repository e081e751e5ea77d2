#include "formats/ggml_types.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/check.h"
#include "core/dtype.h"
#include "core/thread_pool.h"

namespace inflight {
namespace {

constexpr int64_t kQK = 32;    // elements per block of the simple formats (Q4_0 .. Q8_0)
constexpr int64_t kQKK = 256;  // elements per super-block of the k-quants

struct TypeRow {
  uint32_t id;
  GgmlTypeTraits traits;
};

// Sizes from ggml's type_traits (ggml.c); see the block structs in ggml-common.h.
constexpr std::array kTypes = {
    TypeRow{0, {"f32", 1, 4, true}},
    TypeRow{1, {"f16", 1, 2, true}},
    TypeRow{2, {"q4_0", kQK, 2 + kQK / 2, true}},
    TypeRow{3, {"q4_1", kQK, 4 + kQK / 2, true}},
    TypeRow{6, {"q5_0", kQK, 2 + 4 + kQK / 2, false}},
    TypeRow{7, {"q5_1", kQK, 4 + 4 + kQK / 2, false}},
    TypeRow{8, {"q8_0", kQK, 2 + kQK, true}},
    TypeRow{9, {"q8_1", kQK, 4 + kQK, false}},
    TypeRow{10, {"q2_K", kQKK, 4 + kQKK / 16 + kQKK / 4, false}},
    TypeRow{11, {"q3_K", kQKK, 2 + kQKK / 4 + kQKK / 8 + 12, false}},
    TypeRow{12, {"q4_K", kQKK, 4 + 12 + kQKK / 2, true}},
    TypeRow{13, {"q5_K", kQKK, 4 + 12 + kQKK / 8 + kQKK / 2, false}},
    TypeRow{14, {"q6_K", kQKK, 2 + kQKK / 2 + kQKK / 4 + kQKK / 16, true}},
    TypeRow{15, {"q8_K", kQKK, 4 + kQKK + kQKK / 8, false}},
    TypeRow{16, {"iq2_xxs", kQKK, 2 + kQKK / 4, false}},
    TypeRow{17, {"iq2_xs", kQKK, 2 + kQKK / 4 + kQKK / 32, false}},
    TypeRow{18, {"iq3_xxs", kQKK, 2 + kQKK / 4 + kQKK / 8, false}},
    TypeRow{19, {"iq1_s", kQKK, 2 + kQKK / 8 + kQKK / 16, false}},
    TypeRow{20, {"iq4_nl", kQK, 2 + kQK / 2, false}},
    TypeRow{21, {"iq3_s", kQKK, 2 + kQKK / 4 + kQKK / 8 + kQKK / 32 + 4, false}},
    TypeRow{22, {"iq2_s", kQKK, 2 + kQKK / 4 + kQKK / 16, false}},
    TypeRow{23, {"iq4_xs", kQKK, 4 + kQKK / 2 + kQKK / 64, false}},
    TypeRow{24, {"i8", 1, 1, false}},
    TypeRow{25, {"i16", 1, 2, false}},
    TypeRow{26, {"i32", 1, 4, false}},
    TypeRow{27, {"i64", 1, 8, false}},
    TypeRow{28, {"f64", 1, 8, false}},
    TypeRow{29, {"iq1_m", kQKK, kQKK / 8 + kQKK / 16 + kQKK / 32, false}},
    TypeRow{30, {"bf16", 1, 2, true}},
    TypeRow{34, {"tq1_0", kQKK, 2 + 4 * 13, false}},
    TypeRow{35, {"tq2_0", kQKK, 2 + 64, false}},
    TypeRow{39, {"mxfp4", kQK, 1 + kQK / 2, false}},
    TypeRow{40, {"nvfp4", 64, 4 + 32, false}},
    TypeRow{41, {"q1_0", 128, 2 + 16, false}},
};

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
float load_f16(const uint8_t* p) {
  return f16_to_f32(load_u16(p));
}

// block_q4_0 { f16 d; u8 qs[16]; }: x[j] = (lo nibble - 8) * d, x[j + 16] = (hi nibble - 8) * d.
void dequant_q4_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
    y[j + kQK / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// block_q4_1 { f16 d; f16 m; u8 qs[16]; }: x = nibble * d + m, low nibbles first.
void dequant_q4_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
    y[j + kQK / 2] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// block_q8_0 { f16 d; i8 qs[32]; }: x = q * d.
void dequant_q8_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(qs[j]) * d;
}

// The 6-bit scale and min of sub-block j (0..7) of a q4_K block, packed in 12 bytes:
// bytes 0-3 hold scales 0-3 (low 6 bits) and the top 2 bits of scales 4-7; bytes 4-7 the same
// for mins; bytes 8-11 the low 4 bits of scale (low nibble) and min (high nibble) 4-7.
void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// block_q4_K { f16 d; f16 dmin; u8 scales[12]; u8 qs[128]; }: 8 sub-blocks of 32. Each group of
// 32 bytes of qs holds two sub-blocks: low nibbles, then high nibbles.
// x = d * scale * q - dmin * min.
void dequant_q4_k(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0, is = 0; j < kQKK; j += 64, is += 2, q += 32) {
    uint8_t sc, m;
    scale_min_k4(is, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    scale_min_k4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) {
      y[j + l] = d1 * static_cast<float>(q[l] & 0x0f) - m1;
      y[j + l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d; }: 6-bit quants (4 low bits in ql,
// 2 high bits in qh) minus 32, 16 sub-blocks of 16 with an int8 scale each.
// Each half (128 elements) uses 64 bytes of ql, 32 of qh and 8 scales.
void dequant_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + kQKK / 2;
  const auto* sc = reinterpret_cast<const int8_t*>(b + kQKK / 2 + kQKK / 4);
  const float d = load_f16(b + kQKK / 2 + kQKK / 4 + kQKK / 16);
  for (int n = 0; n < kQKK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[is + 0] * static_cast<float>(q1);
      y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
      y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
      y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
    }
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return dequant_q4_0;
    case GgmlType::kQ4_1:
      return dequant_q4_1;
    case GgmlType::kQ8_0:
      return dequant_q8_0;
    case GgmlType::kQ4_K:
      return dequant_q4_k;
    case GgmlType::kQ6_K:
      return dequant_q6_k;
    default:
      return nullptr;
  }
}

// Checked once before any (possibly parallel) work; returns the traits.
const GgmlTypeTraits& checked_traits(GgmlType type, int64_t n) {
  const GgmlTypeTraits* t = ggml_type_traits(static_cast<uint32_t>(type));
  INFLIGHT_CHECK_CODE(t != nullptr && t->can_dequantize, ErrorCode::kUnsupported,
                      "cannot dequantize ggml type {} to f32 (supported: f32, f16, bf16, q4_0, "
                      "q4_1, q8_0, q4_K, q6_K)",
                      ggml_type_name(static_cast<uint32_t>(type)));
  INFLIGHT_CHECK_CODE(n >= 0 && n % t->block_size == 0, ErrorCode::kInvalidArgument,
                      "{} elements is not a whole number of {} blocks of {}", n, t->name,
                      t->block_size);
  return *t;
}

// No checks: callers ran checked_traits().
void dequantize_unchecked(GgmlType type, const uint8_t* src, float* dst, int64_t n) {
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load_u16(src + 2 * i));
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(src + 2 * i));
      return;
    default:
      break;
  }
  const GgmlTypeTraits& t = *ggml_type_traits(static_cast<uint32_t>(type));
  const BlockFn fn = block_fn(type);
  for (int64_t b = 0; b < n / t.block_size; ++b) fn(src + b * t.type_size, dst + b * t.block_size);
}

}  // namespace

const GgmlTypeTraits* ggml_type_traits(uint32_t type) {
  for (const TypeRow& row : kTypes) {
    if (row.id == type) return &row.traits;
  }
  return nullptr;
}

std::string ggml_type_name(uint32_t type) {
  const GgmlTypeTraits* t = ggml_type_traits(type);
  return t ? std::string(t->name) : fmt::format("unknown type {}", type);
}

void dequantize_row(GgmlType type, const uint8_t* src, float* dst, int64_t n) {
  checked_traits(type, n);
  dequantize_unchecked(type, src, dst, n);
}

void dequantize(GgmlType type, const uint8_t* src, float* dst, int64_t n) {
  const GgmlTypeTraits& t = checked_traits(type, n);
  const int64_t num_blocks = n / t.block_size;
  // ~64k elements per chunk: large enough that scheduling is noise.
  const int64_t min_blocks = std::max<int64_t>(1, 65536 / t.block_size);
  ThreadPool::global().parallel_for(
      num_blocks,
      [&](int64_t begin, int64_t end) {
        dequantize_unchecked(type, src + begin * t.type_size, dst + begin * t.block_size,
                             (end - begin) * t.block_size);
      },
      min_blocks);
}

}  // namespace inflight
