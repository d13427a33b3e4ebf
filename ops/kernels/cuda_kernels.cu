// CUDA kernels behind every variant. Torch-free: launched on the caller's
// stream, never synchronising, returning the launch status to the caller.
// Index is the offset type (int32 unless an offset could overflow it); it is
// widened before the first multiply.
//
// Each elementwise and row-wise kernel has two signatures, selected on the real
// pointers at launch (kernels.h: vector_path_ok): W = 16 / sizeof(T) elements per
// access (one 16-byte load or store: 4 floats, 2 doubles, 8 float16/bfloat16) when
// every pointer is 16-byte aligned, and W = 1, the general path, otherwise.
// float16/bfloat16 are stored as bits and computed in float (numeric.h): widened on
// load, rounded once on store (the chain rounds each operation, as eager PyTorch).
// l2norm's forward has two row schedules, selected on the row length and the access
// width (kernels.h: resolve_row_path): one warp per row holding the row in registers
// (read once, no block barrier), and one block per row for long rows.
// The mm kernels are in cuda_mm.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "chain.h"
#include "dispatch.h"
#include "kernels.h"
#include "numeric.h"

namespace dbench::kernels {
namespace {

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

// The injected GPU cost (kernels.h: set_launch_delay_ns): every thread first waits `cycles` SM
// clock cycles. 0, the normal case, costs one uniform branch.
__device__ __forceinline__ void wait_cycles(uint32_t cycles) {
  if (cycles == 0) return;
  const long long start = clock64();
  while (clock64() - start < static_cast<long long>(cycles)) {
  }
}

struct Copy {
  template <class T>
  __device__ T operator()(T x) const { return x; }
};

__device__ __forceinline__ float fused(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double fused(double a, double b, double c) { return fma(a, b, c); }

// One fused multiply-add on both paths, so they agree bit for bit; the 16-bit types take it in
// float (their product is exact there) and round once to their format on store.
struct MulAdd {
  template <class T>
  __device__ T operator()(T a, T b, T c) const {
    using N = Num<T>;
    return N::narrow(fused(N::widen(a), N::widen(b), N::widen(c)));
  }
};

template <int W, class T, class Index>
__global__ void __launch_bounds__(kThreads) copy_kernel(const T* __restrict__ x, T* __restrict__ out, Index n,
                                                        uint32_t delay) {
  wait_cycles(delay);
  elementwise<W>(n, Copy{}, out, x);
}

template <int W, class T, class Index>
__global__ void __launch_bounds__(kThreads) muladd_kernel(const T* __restrict__ a, const T* __restrict__ b,
                                                          const T* __restrict__ c, T* __restrict__ out, Index n,
                                                          uint32_t delay) {
  wait_cycles(delay);
  elementwise<W>(n, MulAdd{}, out, a, b, c);
}

// Chain steps First .. First + K - 1 (chain.h), and the gradient of steps 0 .. K - 1.
template <int First, int K>
struct ChainOp {
  template <class T>
  __device__ T operator()(T x) const { return chain::apply<First, K>(x); }
};

template <int K>
struct ChainGradOp {
  template <class T>
  __device__ T operator()(T g, T x) const { return chain::apply_backward<K>(g, x); }
};

template <int W, class T, class Index, int First, int K>
__global__ void __launch_bounds__(kThreads) chain_kernel(const T* __restrict__ x, T* __restrict__ out, Index n,
                                                         uint32_t delay) {
  wait_cycles(delay);
  elementwise<W>(n, ChainOp<First, K>{}, out, x);
}

template <int W, class T, class Index, int K>
__global__ void __launch_bounds__(kThreads) chain_bwd_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                                             T* __restrict__ gx, Index n) {
  elementwise<W>(n, ChainGradOp<K>{}, gx, g, x);
}

// One thread waiting on the global nanosecond timer: a GPU cost of known length.
__global__ void spin_kernel(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
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

// Sum of squares of one pack's elements, added to ss; and the pack scaled by rstd.
template <class T, int W, class A>
__device__ __forceinline__ A add_squares(A ss, Pack<T, W> v) {  // by value: one wide load
#pragma unroll
  for (int w = 0; w < W; ++w) {
    const A e = Num<T>::widen(v.v[w]);
    ss += e * e;
  }
  return ss;
}

template <class T, int W, class A>
__device__ __forceinline__ Pack<T, W> scaled(Pack<T, W> v, A rstd) {
  Pack<T, W> o;
#pragma unroll
  for (int w = 0; w < W; ++w) o.v[w] = Num<T>::narrow(static_cast<A>(Num<T>::widen(v.v[w]) * rstd));
  return o;
}

template <class A>
__device__ __forceinline__ A row_rstd(A sum_of_squares, double eps) {
  return static_cast<A>(1) / sqrt(sum_of_squares + static_cast<A>(eps));
}

// The block schedule: one block per row (grid-stride over rows), W elements per access: on the
// vector path cols is a multiple of W, so every row starts 16-byte aligned. Any row length; the
// row is read twice (the second read mostly from L2).
template <int W, class T, class Index>
__global__ void __launch_bounds__(kThreads) l2norm_fwd_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                              Index rows, Index cols, double eps,
                                                              uint32_t delay) {
  using A = typename Num<T>::Acc;
  using P = Pack<T, W>;
  wait_cycles(delay);
  const Index packs = cols / W;
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x + r * cols);
    P* yr = reinterpret_cast<P*>(y + r * cols);
    A ss = 0;
    for (Index j = threadIdx.x; j < packs; j += blockDim.x) ss = add_squares(ss, xr[j]);
    const A rstd = row_rstd(block_sum(ss), eps);
    for (Index j = threadIdx.x; j < packs; j += blockDim.x) yr[j] = scaled(xr[j], rstd);
  }
}

// The warp schedule: one warp per row (kWarpsPerBlock rows per block, grid-stride over rows),
// lane l holding the row's accesses l, l + 32, ..., l + 32 * (Packs - 1) in registers. All Packs
// loads of a lane are issued before the first is used, the sum is reduced with shuffles only (no
// shared memory, no barrier) and the row is scaled from the registers: one read of x. Rows of
// at most 32 * Packs accesses (kernels.h: warp_row_packs). The loop bound is uniform per warp,
// so every lane reaches the shuffles.
template <int W, int Packs, class T, class Index>
__global__ void __launch_bounds__(kThreads) l2norm_fwd_warp_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                                   Index rows, Index cols, double eps,
                                                                   uint32_t delay) {
  using A = typename Num<T>::Acc;
  using P = Pack<T, W>;
  wait_cycles(delay);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const Index packs = cols / W;
  const Index stride = static_cast<Index>(gridDim.x) * kWarpsPerBlock;
  const Index first_row = static_cast<Index>(blockIdx.x) * kWarpsPerBlock + static_cast<Index>(threadIdx.x / 32);
  for (Index r = first_row; r < rows; r += stride) {
    const P* xr = reinterpret_cast<const P*>(x + r * cols);
    P* yr = reinterpret_cast<P*>(y + r * cols);
    P v[Packs];
#pragma unroll
    for (int u = 0; u < Packs; ++u) {
      const Index j = lane + u * 32;
      if (j < packs) v[u] = xr[j];
    }
    A ss = 0;
#pragma unroll
    for (int u = 0; u < Packs; ++u) {
      if (lane + u * 32 < packs) ss = add_squares(ss, v[u]);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    const A rstd = row_rstd(ss, eps);
#pragma unroll
    for (int u = 0; u < Packs; ++u) {
      const Index j = lane + u * 32;
      if (j < packs) yr[j] = scaled(v[u], rstd);
    }
  }
}

// Calls f(std::integral_constant<int, P>{}) for the accesses per lane of the warp schedule.
template <class F>
void visit_row_packs(int packs, F&& f) {
  switch (packs) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    default: return f(std::integral_constant<int, kWarpRowPacks>{});  // warp_row_packs gives 1, 2, 4 or 8
  }
}
static_assert(kWarpRowPacks == 8, "visit_row_packs instantiates 1, 2, 4 and 8 accesses per lane");

template <int W, class T, class Index>
__global__ void __launch_bounds__(kThreads) l2norm_bwd_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                                              T* __restrict__ gx, Index rows, Index cols, double eps) {
  using A = typename Num<T>::Acc;
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
        const A xe = Num<T>::widen(xv.v[w]), ge = Num<T>::widen(gv.v[w]);
        ss += xe * xe;
        gdotx += ge * xe;
      }
    }
    const A rstd = row_rstd(block_sum(ss), eps);
    const A dot = block_sum(gdotx) * rstd;  // sum(g * y)
    for (Index j = threadIdx.x; j < packs; j += blockDim.x) {
      const P xv = xr[j], gv = gr[j];
      P o;
#pragma unroll
      for (int w = 0; w < W; ++w) {
        const A xe = Num<T>::widen(xv.v[w]), ge = Num<T>::widen(gv.v[w]);
        o.v[w] = Num<T>::narrow(static_cast<A>(rstd * (ge - xe * rstd * dot)));
      }
      gxr[j] = o;
    }
  }
}

thread_local int64_t t_delay_ns = 0;  // set_launch_delay_ns

// The delay in SM cycles at the device's rated clock (read once per device); a clock running below
// its rating makes the wait longer, never shorter.
uint32_t delay_cycles() {
  if (t_delay_ns <= 0) return 0;
  static std::atomic<int> khz_by_device[64] = {};
  int device = 0, khz = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return 0;
  khz = khz_by_device[device].load(std::memory_order_relaxed);
  if (khz == 0) {
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) != cudaSuccess || khz <= 0) return 0;
    khz_by_device[device].store(khz, std::memory_order_relaxed);
  }
  return static_cast<uint32_t>(std::min<int64_t>(UINT32_MAX, t_delay_ns * khz / 1'000'000));
}

bool use_int32(IndexWidth w, int64_t reachable) {
  if (w == IndexWidth::kAuto) return fits_int32(reachable);
  return w == IndexWidth::kInt32;
}

constexpr int kRefused = static_cast<int>(cudaErrorInvalidValue);

// Calls f(T{}, Index{}, std::integral_constant<int, W>{}) for the runtime dtype, the
// chosen index type and access width (16 bytes when `vector`, else one element),
// then returns the launch status.
template <class F>
int dispatch(DType dt, IndexWidth w, int64_t reachable, bool vector, F&& f) {
  // A forced int32 past the limit never runs (the launchers refuse it before this, with a message).
  if (w == IndexWidth::kInt32 && !fits_int32(reachable)) return kRefused;
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

int grid_for_rows(int64_t rows) { return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(rows, kMaxBlocks))); }
int grid_for_warp_rows(int64_t rows) { return grid_for_rows((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

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
    copy_kernel<W, T, I><<<elementwise_blocks(n, W), kThreads, 0, as_stream(stream)>>>(
        in<T>(x), out<T>(y), I(n), delay_cycles());
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
        in<T>(a), in<T>(b), in<T>(c), out<T>(y), I(n), delay_cycles());
  });
}

int l2norm_fwd_cuda(DType dt, const void* x, void* y, int64_t rows, int64_t cols, double eps, void* stream,
                    IndexWidth w, RowPath path) {
  const void* ptrs[] = {x, y};
  const bool vec = rows_vector_path_ok(ptrs, 2, cols, dt);
  const RowPath schedule = resolve_row_path(path, ptrs, 2, cols, dt);
  if (schedule == RowPath::kAuto) return kRefused;  // a forced warp schedule the rows do not fit
  return dispatch(dt, w, rowwise_reach(rows, cols), vec, [&](auto t, auto i, auto width) {
    using T = decltype(t);
    using I = decltype(i);
    constexpr int W = decltype(width)::value;
    const uint32_t delay = delay_cycles();
    if (schedule == RowPath::kBlock) {
      l2norm_fwd_kernel<W, T, I><<<grid_for_rows(rows), kThreads, 0, as_stream(stream)>>>(
          in<T>(x), out<T>(y), I(rows), I(cols), eps, delay);
      return;
    }
    visit_row_packs(warp_row_packs(cols, W), [&](auto packs) {
      l2norm_fwd_warp_kernel<W, decltype(packs)::value, T, I><<<grid_for_warp_rows(rows), kThreads, 0, as_stream(stream)>>>(
          in<T>(x), out<T>(y), I(rows), I(cols), eps, delay);
    });
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

int chain_cuda(DType dt, const void* x, void* y, int64_t n, int first, int k, void* stream, IndexWidth w) {
  if (k < 1 || k > chain::kMaxLength || first < 0 || (first != 0 && k != 1)) return kRefused;
  const void* ptrs[] = {x, y};
  return dispatch(dt, w, elementwise_reach(n), vector_path_ok(ptrs, 2, n, dt), [&](auto t, auto i, auto width) {
    using T = decltype(t);
    using I = decltype(i);
    constexpr int W = decltype(width)::value;
    const uint32_t delay = delay_cycles();
    const auto launch = [&](auto kernel) {
      kernel<<<elementwise_blocks(n, W), kThreads, 0, as_stream(stream)>>>(in<T>(x), out<T>(y), I(n), delay);
    };
    // The fused chain is steps 0 .. k-1; an unfused chain launches one step at a time.
    if (first == 0) {
      chain::visit_length(k, [&](auto len) { launch(chain_kernel<W, T, I, 0, decltype(len)::value>); });
    } else {
      chain::visit_step(first, [&](auto s) { launch(chain_kernel<W, T, I, decltype(s)::value, 1>); });
    }
  });
}

int chain_bwd_cuda(DType dt, const void* grad, const void* x, void* grad_x, int64_t n, int k, void* stream,
                   IndexWidth w) {
  if (k < 1 || k > chain::kMaxLength) return kRefused;
  const void* ptrs[] = {grad, x, grad_x};
  return dispatch(dt, w, elementwise_reach(n), vector_path_ok(ptrs, 3, n, dt), [&](auto t, auto i, auto width) {
    using T = decltype(t);
    using I = decltype(i);
    constexpr int W = decltype(width)::value;
    chain::visit_length(k, [&](auto len) {
      chain_bwd_kernel<W, T, I, decltype(len)::value><<<elementwise_blocks(n, W), kThreads, 0, as_stream(stream)>>>(
          in<T>(grad), in<T>(x), out<T>(grad_x), I(n));
    });
  });
}

int kernel_attributes(const char* kernel, DType dt, IndexWidth w, bool vector, int k, KernelAttributes* result) {
  if (w == IndexWidth::kAuto || k < 1 || k > chain::kMaxLength) return kRefused;
  if (std::strcmp(kernel, "l2norm_warp") == 0 && (k & (k - 1)) != 0) return kRefused;  // 1, 2, 4 or 8 per lane
  int status = kRefused;
  dispatch(dt, w, 0, vector, [&](auto t, auto i, auto width) {
    using T = decltype(t);
    using I = decltype(i);
    constexpr int W = decltype(width)::value;
    const void* fn = nullptr;
    const auto is = [&](const char* name) { return std::strcmp(kernel, name) == 0; };
    if (is("copy")) fn = reinterpret_cast<const void*>(copy_kernel<W, T, I>);
    if (is("muladd")) fn = reinterpret_cast<const void*>(muladd_kernel<W, T, I>);
    if (is("l2norm")) fn = reinterpret_cast<const void*>(l2norm_fwd_kernel<W, T, I>);
    if (is("l2norm_warp")) {
      visit_row_packs(k, [&](auto packs) {
        fn = reinterpret_cast<const void*>(l2norm_fwd_warp_kernel<W, decltype(packs)::value, T, I>);
      });
    }
    if (is("l2norm_backward")) fn = reinterpret_cast<const void*>(l2norm_bwd_kernel<W, T, I>);
    if (is("chain")) {
      chain::visit_length(k, [&](auto len) { fn = reinterpret_cast<const void*>(chain_kernel<W, T, I, 0, decltype(len)::value>); });
    }
    if (is("chain_backward")) {
      chain::visit_length(k, [&](auto len) { fn = reinterpret_cast<const void*>(chain_bwd_kernel<W, T, I, decltype(len)::value>); });
    }
    if (fn == nullptr) return;
    cudaFuncAttributes attr{};
    status = static_cast<int>(cudaFuncGetAttributes(&attr, fn));
    if (status == 0) *result = {attr.numRegs, static_cast<int>(attr.localSizeBytes), attr.maxThreadsPerBlock};
  });
  return status;
}

void set_launch_delay_ns(int64_t ns) { t_delay_ns = ns; }

int spin_cuda(int64_t ns, void* stream) {
  if (ns <= 0) return 0;
  spin_kernel<<<1, 1, 0, as_stream(stream)>>>(static_cast<uint64_t>(ns));
  return static_cast<int>(cudaGetLastError());
}

const char* cuda_error_string(int code) {
  if (code == kMmKernelUnknown) return "DBENCH_MM_KERNEL must be unset, \"auto\", \"wgmma\" or \"mma_sync\"";
  if (code == kMmWgmmaUnavailable) {
    return "DBENCH_MM_KERNEL=wgmma needs a build with the sm_90a kernel and a compute capability 9.0 device";
  }
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

}  // namespace dbench::kernels
