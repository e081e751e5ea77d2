// KvCacheLayer: one layer of the paged KV cache as tensors (runtime/kv_cache.h owns the
// storage; ops/op_checks.h make_paged_kv turns it into the PagedKv view the kernels take).
//
//   key, value                [num_blocks, block_size, num_kv_heads, head_dim]: the compute
//                             dtype, or e4m3 for an FP8 cache
//   key_scales, value_scales  [num_blocks, block_size, num_kv_heads] f32: e4m3 caches only
#pragma once

#include "core/tensor.h"

namespace inflight {

struct KvCacheLayer {
  Tensor key;
  Tensor value;
  Tensor key_scales;
  Tensor value_scales;
};

}  // namespace inflight
