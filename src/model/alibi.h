// ALiBi slopes (MPT), as MosaicML's MPT and transformers' build_mpt_alibi_tensor compute them:
// with H' = H rounded up to a power of two, slope_i = 2^(-bias_max (i + 1) / H') for
// i = 0 .. H' - 1 (f32: 1 / 2^x of the f32 exponent); when H' > H the heads take the odd-indexed
// slopes, then the even-indexed ones, the first H of them. Head h's attention scores gain
// slope_h * (key position - query position) (ops/paged_attention.h).
//
// NOTE: slopes belong to global head indices: a tensor-parallel rank takes the slice of its
// heads, never the slopes of its own head count.
#pragma once

#include <cstdint>
#include <vector>

namespace inflight {

// [num_heads] slopes of heads 0 .. num_heads - 1.
std::vector<float> alibi_slopes(int64_t num_heads, float bias_max);

}  // namespace inflight
