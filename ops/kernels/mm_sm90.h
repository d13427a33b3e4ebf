// The Hopper wgmma mm kernel (cuda_mm_sm90.cu), present when the build defines
// DBENCH_MM_SM90A (its translation unit is compiled for sm_90a).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dbench::kernels {

// out[m, n] = a[m, k] @ b[k, n], row-major, float16 (bf16 = false) or bfloat16, fp32
// accumulation. Needs compute capability 9.0, 16-byte aligned a, b, out, and K, N multiples of 8.
cudaError_t mm_sm90(bool bf16, const void* a, const void* b, void* out, int64_t m, int64_t k, int64_t n, int device,
                    cudaStream_t stream);

}  // namespace dbench::kernels
