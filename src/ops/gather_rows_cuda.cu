// gather_rows on CUDA: dst[i, :] = src[indices[i], :], a bitwise row copy.
//
// One block per output row; the row is moved in the widest unit (16, 4 or 2 bytes) that the
// row length and both base pointers allow, so a bf16 row of 576 elements moves as 72 uint4.
// NOTE: index values are trusted (the model checks token ids on the host before upload).
#include "ops/cuda_common.cuh"
#include "ops/ops_cuda.cuh"

namespace inflight {

namespace {

struct GatherArgs {
  const char* src = nullptr;         // [src_rows, row_units] units of U
  const int32_t* indices = nullptr;  // [num_rows]
  char* dst = nullptr;               // [num_rows, row_units]
  int64_t row_units = 0;             // units of U per row
  int64_t src_rows = 0;
  int64_t first_index = 0;  // src row r holds index first_index + r
};

template <typename U>
__global__ void gather_rows_kernel(GatherArgs a) {
  const int64_t row = blockIdx.x;
  const int64_t r = static_cast<int64_t>(a.indices[row]) - a.first_index;
  auto* dst = reinterpret_cast<U*>(a.dst) + row * a.row_units;
  if (r < 0 || r >= a.src_rows) {  // another vocabulary shard's token
    for (int64_t i = threadIdx.x; i < a.row_units; i += blockDim.x) dst[i] = U{};
    return;
  }
  const auto* src = reinterpret_cast<const U*>(a.src) + r * a.row_units;
  for (int64_t i = threadIdx.x; i < a.row_units; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

void gather_rows_cuda(const GatherRowsParams& p, cudaStream_t stream) {
  const size_t esize = dtype_size(p.dtype);
  INFLIGHT_CHECK_CODE(esize == 2 || esize == 4, ErrorCode::kUnsupported,
                      "gather_rows_cuda: element size {} is not supported", esize);
  if (p.num_rows == 0 || p.cols == 0) return;
  INFLIGHT_CHECK(p.num_rows <= cuda::kMaxGridX, "gather_rows_cuda: {} rows exceed the grid",
                 p.num_rows);
  const size_t row_bytes = static_cast<size_t>(p.cols) * esize;
  size_t unit = esize;
  for (size_t u : {size_t{16}, size_t{4}}) {
    if (u > esize && row_bytes % u == 0 && cuda::aligned(p.src, u) && cuda::aligned(p.dst, u)) {
      unit = u;
      break;
    }
  }
  GatherArgs a;
  a.src = static_cast<const char*>(p.src);
  a.indices = p.indices;
  a.dst = static_cast<char*>(p.dst);
  a.row_units = static_cast<int64_t>(row_bytes / unit);
  a.src_rows = p.src_rows;
  a.first_index = p.first_index;
  const int threads = static_cast<int>(std::min<int64_t>(256, (a.row_units + 31) / 32 * 32));
  const auto grid = static_cast<unsigned>(p.num_rows);
  switch (unit) {
    case 16:
      gather_rows_kernel<uint4><<<grid, threads, 0, stream>>>(a);
      break;
    case 4:
      gather_rows_kernel<uint32_t><<<grid, threads, 0, stream>>>(a);
      break;
    default:
      gather_rows_kernel<uint16_t><<<grid, threads, 0, stream>>>(a);
      break;
  }
  INFLIGHT_CUDA_CHECK_LAUNCH();
}

}  // namespace inflight
