// CUDA kernels behind every variant. Torch-free: launched on the caller's
// stream, never synchronising, returning the launch status to the caller.
// Index is the offset type (int32 unless an offset could overflow it); it is
// widened before the first multiply.
//
// Each elementwise and row-wise kernel has two signatures, selected on the real
// pointers at launch (kernels.h: vector_path_ok): W = 16 / sizeof(T) elements per
// access (float4 / double2 loads and stores) when every pointer is 16-byte aligned,
// and W = 1, the general path, otherwise. The mm kernels are in cuda_mm.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "dispatch.h"
#include "kernels.h"

namespace dbench::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 65535;
// Independent accesses per thread and input in flight before the first store.
constexpr int kUnroll = 4;

template <class T>
struct Acc { using type = float; };
template <>
struct Acc<double> { using type = double; };

// W consecutive elements moved by one access: 16 bytes for the vector path.
template <class T, int W>
struct alignas(sizeof(T) * W) Pack {
  T v[W];
};

// op applied lane by lane; the packs come by value so each is one wide load.
template <class P, class Op, class... Ps>
__device__ __forceinline__ P apply(Op op, Ps... p) {
  P r;
#pragma unroll
  for (int w = 0; w < static_cast<int>(sizeof(r.v) / sizeof(r.v[0])); ++w) r.v[w] = op(p.v[w]...);
  return r;
}

// out[i] = op(in[i]...) for i < n: grid-stride over packs of W elements, kUnroll
// packs per thread per step, then the n % W tail elements by the first threads.
template <int W, class T, class Index, class Op, class... In>
__device__ __forceinline__ void elementwise(Index n, Op op, T* __restrict__ out, const In* __restrict__... in) {
  using P = Pack<T, W>;
  const Index packs = n / W;
  const Index stride = static_cast<Index>(blockDim.x) * gridDim.x;
  const Index first = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x;
  Index i = first;
  for (; i + (kUnroll - 1) * stride < packs; i += kUnroll * stride) {
    P r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) r[u] = apply<P>(op, reinterpret_cast<const Pack<In, W>*>(in)[i + u * stride]...);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) reinterpret_cast<P*>(out)[i + u * stride] = r[u];
  }
  for (; i < packs; i += stride) reinterpret_cast<P*>(out)[i] = apply<P>(op, reinterpret_cast<const Pack<In, W>*>(in)[i]...);
  if constexpr (W > 1) {
    const Index t = packs * W + first;
    if (t < n) out[t] = op(in[t]...);
  }
}

struct Copy {
  template <class T>
  __device__ T operator()(T x) const { return x; }
};

// One rounding (fused multiply-add) on both paths, so they agree bit for bit.
struct MulAdd {
  __device__ float operator()(float a, float b, float c) const { return fmaf(a, b, c); }
  __device__ double operator()(double a, double b, double c) const { return fma(a, b, c); }
};

template <int W, class T, class Index>
__global__ void __launch_bounds__(kThreads) copy_kernel(const T* __restrict__ x, T* __restrict__ out, Index n) {
  elementwise<W>(n, Copy{}, out, x);
}

template <int W, class T, class Index>
__global__ void __launch_bounds__(kThreads) muladd_kernel(const T* __restrict__ a, const T* __restrict__ b,
                                                          const T* __restrict__ c, T* __restrict__ out, Index n) {
  elementwise<W>(n, MulAdd{}, out, a, b, c);
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

// One block per row (grid-stride over rows), W elements per access: on the vector
// path cols is a multiple of W, so every row starts 16-byte aligned.
template <int W, class T, class Index>
__global__ void __launch_bounds__(kThreads) l2norm_fwd_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                              Index rows, Index cols, double eps) {
  using A = typename Acc<T>::type;
  using P = Pack<T, W>;
  const Index packs = cols / W;
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x + r * cols);
    P* yr = reinterpret_cast<P*>(y + r * cols);
    A ss = 0;
    for (Index j = threadIdx.x; j < packs; j += blockDim.x) {
      const P v = xr[j];
#pragma unroll
      for (int w = 0; w < W; ++w) ss += static_cast<A>(v.v[w]) * v.v[w];
    }
    const A rstd = static_cast<A>(1) / sqrt(block_sum(ss) + static_cast<A>(eps));
    for (Index j = threadIdx.x; j < packs; j += blockDim.x) {
      const P v = xr[j];
      P o;
#pragma unroll
      for (int w = 0; w < W; ++w) o.v[w] = static_cast<T>(v.v[w] * rstd);
      yr[j] = o;
    }
  }
}

template <int W, class T, class Index>
__global__ void __launch_bounds__(kThreads) l2norm_bwd_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                                              T* __restrict__ gx, Index rows, Index cols, double eps) {
  using A = typename Acc<T>::type;
  using P = Pack<T, W>;
  const Index packs = cols / W;
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    const P* gr = reinterpret_cast<const P*>(g + r * cols);
    const P* xr = reinterpret_cast<const P*>(x + r * cols);
    P* gxr = reinterpret_cast<P*>(gx + r * cols);
    A ss = 0, gdotx = 0;
    for (Index j = threadIdx.x; j < packs; j += blockDim.x) {
      const P xv = xr[j], gv = gr[j];
#pragma unroll
      for (int w = 0; w < W; ++w) {
        ss += static_cast<A>(xv.v[w]) * xv.v[w];
        gdotx += static_cast<A>(gv.v[w]) * xv.v[w];
      }
    }
    const A rstd = static_cast<A>(1) / sqrt(block_sum(ss) + static_cast<A>(eps));
    const A dot = block_sum(gdotx) * rstd;  // sum(g * y)
    for (Index j = threadIdx.x; j < packs; j += blockDim.x) {
      const P xv = xr[j], gv = gr[j];
      P o;
#pragma unroll
      for (int w = 0; w < W; ++w) o.v[w] = static_cast<T>(rstd * (gv.v[w] - static_cast<A>(xv.v[w]) * rstd * dot));
      gxr[j] = o;
    }
  }
}

int blocks_for(int64_t work) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((work + kThreads - 1) / kThreads, kMaxBlocks)));
}

// Threads enough for kUnroll packs each; the scalar path (W = 1) gets the most.
int elementwise_blocks(int64_t n, int width) { return blocks_for((n / width + kUnroll - 1) / kUnroll); }

bool use_int32(IndexWidth w, int64_t reachable) {
  if (w == IndexWidth::kAuto) return fits_int32(reachable);
  return w == IndexWidth::kInt32;
}

// Calls f(T{}, Index{}, std::integral_constant<int, W>{}) for the runtime dtype, the
// chosen index type and access width (16 bytes when `vector`, else one element),
// then returns the launch status.
template <class F>
int dispatch(DType dt, IndexWidth w, int64_t reachable, bool vector, F&& f) {
  return visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    auto with_index = [&](auto index) {
      if (vector) f(tag, index, std::integral_constant<int, kVectorBytes / static_cast<int>(sizeof(T))>{});
      else f(tag, index, std::integral_constant<int, 1>{});
    };
    if (use_int32(w, reachable)) with_index(int32_t{});
    else with_index(int64_t{});
    return static_cast<int>(cudaGetLastError());
  });
}

// Largest index a grid-stride loop computes, so that no index arithmetic overflows:
// elementwise, i + (kUnroll - 1) * stride with i up to packs + kUnroll * stride, and
// the tail's packs * W + thread (bounded with the scalar path's grid, the largest);
// row-wise, the last element plus one block.
int64_t elementwise_reach(int64_t n) {
  return n + int64_t{2 * kUnroll + 1} * kThreads * elementwise_blocks(n, 1);
}
int64_t rowwise_reach(int64_t rows, int64_t cols) { return rows * cols + kThreads; }

int grid_for_rows(int64_t rows) { return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(rows, kMaxBlocks))); }

template <class T>
const T* in(const void* p) { return static_cast<const T*>(p); }
template <class T>
T* out(void* p) { return static_cast<T*>(p); }

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

bool cuda_kernels_available() { return true; }

int noop_cuda(DType dt, const void* x, void* y, int64_t n, void* stream, IndexWidth w) {
  const void* ptrs[] = {x, y};
  return dispatch(dt, w, elementwise_reach(n), vector_path_ok(ptrs, 2, n, dt), [&](auto t, auto i, auto width) {
    using T = decltype(t);
    using I = decltype(i);
    constexpr int W = decltype(width)::value;
    copy_kernel<W, T, I><<<elementwise_blocks(n, W), kThreads, 0, as_stream(stream)>>>(in<T>(x), out<T>(y), I(n));
  });
}

int muladd_cuda(DType dt, const void* a, const void* b, const void* c, void* y, int64_t n, void* stream,
                IndexWidth w) {
  const void* ptrs[] = {a, b, c, y};
  return dispatch(dt, w, elementwise_reach(n), vector_path_ok(ptrs, 4, n, dt), [&](auto t, auto i, auto width) {
    using T = decltype(t);
    using I = decltype(i);
    constexpr int W = decltype(width)::value;
    muladd_kernel<W, T, I><<<elementwise_blocks(n, W), kThreads, 0, as_stream(stream)>>>(
        in<T>(a), in<T>(b), in<T>(c), out<T>(y), I(n));
  });
}

int l2norm_fwd_cuda(DType dt, const void* x, void* y, int64_t rows, int64_t cols, double eps, void* stream,
                    IndexWidth w) {
  const void* ptrs[] = {x, y};
  const bool vec = rows_vector_path_ok(ptrs, 2, cols, dt);
  return dispatch(dt, w, rowwise_reach(rows, cols), vec, [&](auto t, auto i, auto width) {
    using T = decltype(t);
    using I = decltype(i);
    constexpr int W = decltype(width)::value;
    l2norm_fwd_kernel<W, T, I><<<grid_for_rows(rows), kThreads, 0, as_stream(stream)>>>(
        in<T>(x), out<T>(y), I(rows), I(cols), eps);
  });
}

int l2norm_bwd_cuda(DType dt, const void* grad, const void* x, void* grad_x, int64_t rows, int64_t cols, double eps,
                    void* stream, IndexWidth w) {
  const void* ptrs[] = {grad, x, grad_x};
  const bool vec = rows_vector_path_ok(ptrs, 3, cols, dt);
  return dispatch(dt, w, rowwise_reach(rows, cols), vec, [&](auto t, auto i, auto width) {
    using T = decltype(t);
    using I = decltype(i);
    constexpr int W = decltype(width)::value;
    l2norm_bwd_kernel<W, T, I><<<grid_for_rows(rows), kThreads, 0, as_stream(stream)>>>(
        in<T>(grad), in<T>(x), out<T>(grad_x), I(rows), I(cols), eps);
  });
}

const char* cuda_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

}  // namespace dbench::kernels
