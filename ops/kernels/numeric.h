// The element types of the elementwise and row-wise kernels and their arithmetic, shared by the
// CPU kernels and the CUDA kernels.
//
// float16 and bfloat16 are stored as raw bits (Float16, BFloat16): torch-free, and independent of
// the operators of cuda_fp16.h / cuda_bf16.h, which torch's builds may switch off
// (__CUDA_NO_HALF_OPERATORS__). They are computed in float: widened on load (exact) and narrowed
// once on store (round to nearest, ties to even, as the GPUs and torch do). float and double are
// their own arithmetic.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define DBENCH_HD __host__ __device__ __forceinline__
#else
#define DBENCH_HD inline __attribute__((always_inline))
#endif

#include "half_convert.h"

namespace dbench::kernels {

struct Float16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// Num<T>: Acc, the arithmetic type, and widen / narrow between it and the stored T.
template <class T>
struct Num {
  using Acc = T;
  static DBENCH_HD T widen(T v) { return v; }
  static DBENCH_HD T narrow(T v) { return v; }
};

template <>
struct Num<Float16> {
  using Acc = float;
  static DBENCH_HD float widen(Float16 v) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(v.bits));
#else
    return halfconv::fp16_to_float(v.bits);
#endif
  }
  static DBENCH_HD Float16 narrow(float v) {
#if defined(__CUDA_ARCH__)
    return {__half_as_ushort(__float2half_rn(v))};
#else
    return {halfconv::float_to_fp16(v)};
#endif
  }
};

template <>
struct Num<BFloat16> {
  using Acc = float;
  static DBENCH_HD float widen(BFloat16 v) {
#if defined(__CUDA_ARCH__)
    return __bfloat162float(__ushort_as_bfloat16(v.bits));
#else
    return halfconv::bf16_to_float(v.bits);
#endif
  }
  static DBENCH_HD BFloat16 narrow(float v) {
#if defined(__CUDA_ARCH__)
    return {__bfloat16_as_ushort(__float2bfloat16_rn(v))};
#else
    return {halfconv::float_to_bf16(v)};
#endif
  }
};

}  // namespace dbench::kernels
