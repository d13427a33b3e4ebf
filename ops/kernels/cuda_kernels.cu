// CUDA kernels behind every variant. Torch-free: launched on the caller's
// stream, never synchronising, returning the launch status to the caller.
// Index is the offset type (int32 unless an offset could overflow it); it is
// widened before the first multiply.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "dispatch.h"
#include "kernels.h"

namespace dbench::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 65535;

template <class T>
struct Acc { using type = float; };
template <>
struct Acc<double> { using type = double; };

template <class T, class Index>
__global__ void copy_kernel(const T* __restrict__ x, T* __restrict__ out, Index n) {
  const Index stride = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = x[i];
  }
}

template <class T, class Index>
__global__ void muladd_kernel(const T* __restrict__ a, const T* __restrict__ b,
                              const T* __restrict__ c, T* __restrict__ out, Index n) {
  const Index stride = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = a[i] * b[i] + c[i];
  }
}

// Block-wide sum; every thread gets the result.
template <class A>
__device__ A block_sum(A v) {
  __shared__ A warp_sums[kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  A total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += warp_sums[w];
  __syncthreads();  // warp_sums is reused by the next call
  return total;
}

// One block per row (grid-stride over rows).
template <class T, class Index>
__global__ void l2norm_fwd_kernel(const T* __restrict__ x, T* __restrict__ y, Index rows,
                                  Index cols, double eps) {
  using A = typename Acc<T>::type;
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    A ss = 0;
    for (Index j = threadIdx.x; j < cols; j += blockDim.x) ss += static_cast<A>(xr[j]) * xr[j];
    const A rstd = static_cast<A>(1) / sqrt(block_sum(ss) + static_cast<A>(eps));
    for (Index j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = static_cast<T>(xr[j] * rstd);
  }
}

template <class T, class Index>
__global__ void l2norm_bwd_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                  T* __restrict__ gx, Index rows, Index cols, double eps) {
  using A = typename Acc<T>::type;
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* gr = g + r * cols;
    const T* xr = x + r * cols;
    T* gxr = gx + r * cols;
    A ss = 0, gdotx = 0;
    for (Index j = threadIdx.x; j < cols; j += blockDim.x) {
      ss += static_cast<A>(xr[j]) * xr[j];
      gdotx += static_cast<A>(gr[j]) * xr[j];
    }
    const A rstd = static_cast<A>(1) / sqrt(block_sum(ss) + static_cast<A>(eps));
    const A dot = block_sum(gdotx) * rstd;  // sum(g * y)
    for (Index j = threadIdx.x; j < cols; j += blockDim.x) {
      gxr[j] = static_cast<T>(rstd * (gr[j] - static_cast<A>(xr[j]) * rstd * dot));
    }
  }
}

int blocks_for(int64_t work) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((work + kThreads - 1) / kThreads, kMaxBlocks)));
}

bool use_int32(IndexWidth w, int64_t reachable) {
  if (w == IndexWidth::kAuto) return fits_int32(reachable);
  return w == IndexWidth::kInt32;
}

// Calls f(T{}, Index{}) for the runtime dtype and the chosen index type, then
// returns the launch status.
template <class F>
int dispatch(DType dt, IndexWidth w, int64_t reachable, F&& f) {
  return visit_dtype(dt, [&](auto tag) {
    if (use_int32(w, reachable)) f(tag, int32_t{});
    else f(tag, int64_t{});
    return static_cast<int>(cudaGetLastError());
  });
}

// Largest index a grid-stride loop computes: the last element plus one full
// stride (elementwise) or one block (row-wise), so i += stride cannot overflow.
int64_t elementwise_reach(int64_t n) { return n + int64_t{kThreads} * blocks_for(n); }
int64_t rowwise_reach(int64_t rows, int64_t cols) { return rows * cols + kThreads; }

int grid_for_rows(int64_t rows) { return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(rows, kMaxBlocks))); }

template <class T>
const T* in(const void* p) { return static_cast<const T*>(p); }
template <class T>
T* out(void* p) { return static_cast<T*>(p); }

}  // namespace

bool cuda_kernels_available() { return true; }

int noop_cuda(DType dt, const void* x, void* y, int64_t n, void* stream, IndexWidth w) {
  return dispatch(dt, w, elementwise_reach(n), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    copy_kernel<T, I><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(in<T>(x), out<T>(y), I(n));
  });
}

int muladd_cuda(DType dt, const void* a, const void* b, const void* c, void* y, int64_t n, void* stream,
                IndexWidth w) {
  return dispatch(dt, w, elementwise_reach(n), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    muladd_kernel<T, I><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        in<T>(a), in<T>(b), in<T>(c), out<T>(y), I(n));
  });
}

int l2norm_fwd_cuda(DType dt, const void* x, void* y, int64_t rows, int64_t cols, double eps, void* stream,
                    IndexWidth w) {
  return dispatch(dt, w, rowwise_reach(rows, cols), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    l2norm_fwd_kernel<T, I><<<grid_for_rows(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        in<T>(x), out<T>(y), I(rows), I(cols), eps);
  });
}

int l2norm_bwd_cuda(DType dt, const void* grad, const void* x, void* grad_x, int64_t rows, int64_t cols, double eps,
                    void* stream, IndexWidth w) {
  return dispatch(dt, w, rowwise_reach(rows, cols), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    l2norm_bwd_kernel<T, I><<<grid_for_rows(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        in<T>(grad), in<T>(x), out<T>(grad_x), I(rows), I(cols), eps);
  });
}

const char* cuda_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

}  // namespace dbench::kernels
