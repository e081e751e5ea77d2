// The host half of ops/tma.cuh: tensor maps, encoded by the driver's cuTensorMapEncodeTiled,
// reached through the runtime (no link against libcuda).
#include <cudaTypedefs.h>

#include "core/check.h"
#include "ops/cuda_check.h"
#include "ops/tma.cuh"

namespace inflight::cuda::tma {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    INFLIGHT_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                         cudaEnableDefault, &found));
    INFLIGHT_CHECK(found == cudaDriverEntryPointSuccess && fn != nullptr,
                   "the CUDA driver has no cuTensorMapEncodeTiled (needs CUDA 12 or later)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

}  // namespace

CUtensorMap map_2d_bytes(const void* base, int64_t rows, int64_t row_bytes, int box_rows) {
  INFLIGHT_CHECK(rows > 0 && row_bytes > 0 && row_bytes % 16 == 0 && box_rows > 0 &&
                     box_rows <= 256 && reinterpret_cast<uintptr_t>(base) % 16 == 0,
                 "tma::map_2d_bytes: {} rows of {} bytes, boxes of {} rows, base {}", rows,
                 row_bytes, box_rows, base);
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(row_bytes), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_bytes)};
  const cuuint32_t box[2] = {128, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r =
      encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box,
                element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  INFLIGHT_CHECK(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed ({}): {} rows of {} bytes",
                 static_cast<int>(r), rows, row_bytes);
  return map;
}

}  // namespace inflight::cuda::tma
