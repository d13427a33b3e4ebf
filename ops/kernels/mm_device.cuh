// Device helpers shared by the mm kernels (cuda_mm.cu: mma.sync; cuda_mm_sm90.cu: wgmma).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "numeric.h"

namespace dbench::kernels::mmdev {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; src_bytes = 0 writes zeros (the matrix edges). No memory
// clobbers: the kernels order shared memory by the barrier (and fence) after each wait.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// float -> the 16-bit type's bits, rounded to nearest even.
template <bool kBf16>
__device__ __forceinline__ uint16_t to_bits(float v) {
  if constexpr (kBf16) return Num<BFloat16>::narrow(v).bits;
  else return Num<Float16>::narrow(v).bits;
}

// The output tile (m0, n0) of CTA `pid`, rasterised in groups of `group` tile rows: consecutive
// CTAs sweep a group's rows per tile column, so the B tiles they share stay in L2.
struct TileOrigin {
  int64_t m0, n0;
};
__device__ __forceinline__ TileOrigin tile_origin(int64_t pid, int64_t m, int64_t n, int bm, int bn, int group) {
  const int64_t tiles_m = (m + bm - 1) / bm, tiles_n = (n + bn - 1) / bn;
  const int64_t per_group = group * tiles_n;
  const int64_t first_m = pid / per_group * group;
  const int64_t group_m = min(tiles_m - first_m, static_cast<int64_t>(group));
  return {(first_m + pid % per_group % group_m) * bm, pid % per_group / group_m * bn};
}

// Rows g and g + 8, columns 2t and 2t + 1 of one 16 x 8 accumulator tile (the mma.sync C
// layout, which wgmma repeats along N) as 16-bit pairs; `paired` when n is even (4-byte stores).
template <bool kBf16>
__device__ __forceinline__ void store_pair(uint16_t* __restrict__ out, int64_t m, int64_t n, int64_t row,
                                           int64_t col, float lo_f, float hi_f, bool paired) {
  if (row >= m) return;
  uint16_t* dst = out + row * n + col;
  const uint16_t lo = to_bits<kBf16>(lo_f), hi = to_bits<kBf16>(hi_f);
  if (paired && col + 1 < n) {
    *reinterpret_cast<uint32_t*>(dst) = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  } else {
    if (col < n) dst[0] = lo;
    if (col + 1 < n) dst[1] = hi;
  }
}

}  // namespace dbench::kernels::mmdev
