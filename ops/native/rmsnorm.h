// rmsnorm: y = x * rsqrt(mean(x * x, last dim) + eps) * weight, row-wise, with its backward
// (grad_x, grad_weight). The whole native op in one file (ops/csrc/native_op.h says what a
// declaration holds): the declaration, its body over both tensor APIs, and its CPU and CUDA kernels,
// which CMake compiles into the kernels library (the generated native_kernels.cpp and .cu define
// DBENCH_NATIVE_KERNELS; the .cu is built only with CUDA, which also defines DBENCH_CUDA_KERNELS).
//
// Numerics, as l2norm's: float16/bfloat16 are computed in float (CUDA) and every dtype in double on
// the CPU, rounded once on store. The CUDA backward is deterministic: grad_weight is reduced over row
// chunks into partial sums, then over the chunks in a fixed order (no atomics).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <utility>

#include "../csrc/native_op.h"
#include "../csrc/op_checks.h"
#include "../kernels/kernels.h"

namespace dbench::kernels::rmsnorm {

// y[r, :] = x[r, :] * rstd_r * w, rstd_r = 1 / sqrt(mean(x[r, :]^2) + eps).
void fwd_cpu(DType dt, const void* x, const void* w, void* y, int64_t rows, int64_t cols, double eps);
// gx = rstd * (g * w - x * rstd^2 * mean(g * w * x)), gw = sum over rows of g * x * rstd.
void bwd_cpu(DType dt, const void* g, const void* x, const void* w, void* gx, void* gw, int64_t rows, int64_t cols,
             double eps);
// Launch on `stream` without synchronising; return the cudaError_t (0 on success), or -1 in a build
// without CUDA kernels (cuda_error_string says so).
int fwd_cuda(DType dt, const void* x, const void* w, void* y, int64_t rows, int64_t cols, double eps, void* stream);
// `scratch`: scratch_bytes(dt, rows, cols) bytes of device memory, 8-byte aligned.
int bwd_cuda(DType dt, const void* g, const void* x, const void* w, void* gx, void* gw, void* scratch, int64_t rows,
             int64_t cols, double eps, void* stream);

// The CUDA backward's row chunks for grad_weight: at least kChunkRows rows each, at most 65535 chunks.
inline constexpr int64_t kChunkRows = 64;
inline int64_t chunk_rows(int64_t rows) { return std::max(kChunkRows, (rows + 65534) / 65535); }
inline int64_t chunks(int64_t rows) { return std::max<int64_t>(1, (rows + chunk_rows(rows) - 1) / chunk_rows(rows)); }
// Its scratch: one rstd per row and one partial grad_weight per chunk and column, in the accumulator type.
inline int64_t scratch_bytes(DType dt, int64_t rows, int64_t cols) {
  return (rows + chunks(rows) * cols) * (dt == DType::kFloat64 ? 8 : 4);
}

}  // namespace dbench::kernels::rmsnorm

namespace dbench::native {

struct rmsnorm {
  static constexpr char kName[] = "rmsnorm";
  static constexpr char kSignature[] = "(Tensor x, Tensor weight, float eps) -> Tensor";
  static constexpr char kDoc[] = "row-wise RMS normalisation with a weight over the last dimension";
  static constexpr std::array<const char*, 3> kArgNames{"x", "weight", "eps"};
  using Args = native::Args<Tensor, Tensor, Float>;

  // The shared contract, then x: at least 1-D, weight: 1-D of x's last dimension; rows x cols.
  template <class Api>
  static std::pair<int64_t, int64_t> rows_cols(const char* op, const typename Api::Tensor& x,
                                               const typename Api::Tensor& weight, double eps) {
    Api::check(eps > 0.0, op, ": eps must be positive, got ", eps);
    Api::check(x.dim() >= 1, op, ": expected a tensor with at least 1 dimension, got a scalar");
    const int64_t cols = x.size(x.dim() - 1);
    Api::check(weight.dim() == 1 && weight.size(0) == cols, op,
               ": argument 'weight' must be a 1-D tensor of the last dimension's size ", cols, ", got shape ",
               Api::sizes(weight));
    return {cols == 0 ? 0 : x.numel() / cols, cols};
  }

  template <class Api>
  static typename Api::Tensor forward(const char* op, const typename Api::Tensor& x,
                                      const typename Api::Tensor& weight, double eps) {
    using T = typename Api::Tensor;
    Api::check_inputs(op, {{"x", &x}, {"weight", &weight}}, InputRule{false});
    const auto rc = rows_cols<Api>(op, x, weight, eps);  // (no structured binding: lambdas capture these)
    const int64_t rows = rc.first, cols = rc.second;
    const T xc = Api::contiguous(x), wc = Api::contiguous(weight);
    T y = Api::contiguous_output(xc);
    const auto dt = Api::dtype(xc);
    namespace k = kernels::rmsnorm;
    Api::launch(
        op, xc, [&] { k::fwd_cpu(dt, xc.const_data_ptr(), wc.const_data_ptr(), y.mutable_data_ptr(), rows, cols, eps); },
        [&](void* s) {
          return k::fwd_cuda(dt, xc.const_data_ptr(), wc.const_data_ptr(), y.mutable_data_ptr(), rows, cols, eps, s);
        });
    return y;
  }

  using Gradient = BackwardOp;
  struct backward {
    static constexpr char kName[] = "rmsnorm_backward";
    static constexpr char kSignature[] = "(Tensor grad, Tensor x, Tensor weight, float eps) -> (Tensor, Tensor)";
    static constexpr char kDoc[] = "gradients of rmsnorm: (grad_x, grad_weight)";
    static constexpr std::array<const char*, 4> kArgNames{"grad", "x", "weight", "eps"};
    using Args = native::Args<Tensor, Tensor, Tensor, Float>;

    template <class Api>
    static std::tuple<typename Api::Tensor, typename Api::Tensor> forward(const char* op,
                                                                         const typename Api::Tensor& grad,
                                                                         const typename Api::Tensor& x,
                                                                         const typename Api::Tensor& weight,
                                                                         double eps) {
      using T = typename Api::Tensor;
      Api::check_inputs(op, {{"grad", &grad}, {"x", &x}, {"weight", &weight}}, InputRule{false});
      bool same = grad.dim() == x.dim();
      for (int64_t d = 0; same && d < x.dim(); ++d) same = grad.size(d) == x.size(d);
      Api::check(same, op, ": arguments 'grad' and 'x' have mismatched shapes ", Api::sizes(grad), " vs ",
                 Api::sizes(x));
      const auto rc = rows_cols<Api>(op, x, weight, eps);
      const int64_t rows = rc.first, cols = rc.second;
      const T gc = Api::contiguous(grad), xc = Api::contiguous(x), wc = Api::contiguous(weight);
      T gx = Api::contiguous_output(xc);
      T gw = Api::contiguous_output(wc);
      const auto dt = Api::dtype(xc);
      namespace k = kernels::rmsnorm;
      Api::launch(
          op, xc,
          [&] {
            k::bwd_cpu(dt, gc.const_data_ptr(), xc.const_data_ptr(), wc.const_data_ptr(), gx.mutable_data_ptr(),
                       gw.mutable_data_ptr(), rows, cols, eps);
          },
          [&](void* s) {
            const int64_t size = kernels::dtype_size(dt);
            T scratch = Api::empty_2d(xc, 1, (k::scratch_bytes(dt, rows, cols) + size - 1) / size);
            return k::bwd_cuda(dt, gc.const_data_ptr(), xc.const_data_ptr(), wc.const_data_ptr(),
                               gx.mutable_data_ptr(), gw.mutable_data_ptr(), scratch.mutable_data_ptr(), rows, cols,
                               eps, s);
          });
      return {gx, gw};
    }
  };

  static constexpr bool kBoundary = false;  // a kernel of the roofline: time its boundary with --ops rmsnorm
};

}  // namespace dbench::native

// ---- The kernels: compiled once, into the kernels library ------------------------------------
#if defined(DBENCH_NATIVE_KERNELS)
#include <cmath>
#include <vector>

#include "../kernels/dispatch.h"
#include "../kernels/numeric.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>

namespace dbench::kernels::rmsnorm {
namespace {

constexpr int kBlock = 256;

// One block per row (grid-stride over rows): the sum of squares, then the scaled row.
template <class T>
__global__ void __launch_bounds__(kBlock)
    fwd_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t rows, int64_t cols,
               double eps) {
  using A = typename Num<T>::Acc;
  using Reduce = cub::BlockReduce<A, kBlock>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ A row_rstd;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    A ss = 0;
    for (int64_t j = threadIdx.x; j < cols; j += kBlock) {
      const A e = Num<T>::widen(xr[j]);
      ss += e * e;
    }
    const A total = Reduce(tmp).Sum(ss);
    if (threadIdx.x == 0) row_rstd = A(1) / sqrt(total / static_cast<A>(cols) + static_cast<A>(eps));
    __syncthreads();
    const A rstd = row_rstd;
    for (int64_t j = threadIdx.x; j < cols; j += kBlock) {
      yr[j] = Num<T>::narrow(static_cast<A>(Num<T>::widen(xr[j]) * rstd * Num<T>::widen(w[j])));
    }
    __syncthreads();  // tmp and row_rstd are the next row's
  }
}

// One block per row: grad_x, and the row's rstd for grad_weight.
template <class T, class A>
__global__ void __launch_bounds__(kBlock)
    bwd_rows_kernel(const T* __restrict__ g, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ gx,
                    A* __restrict__ rstd_out, int64_t rows, int64_t cols, double eps) {
  using Reduce = cub::BlockReduce<A, kBlock>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ A row_rstd, row_scale;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* gr = g + r * cols;
    const T* xr = x + r * cols;
    T* gxr = gx + r * cols;
    A ss = 0, dot = 0;  // sum(x * x), sum(g * w * x)
    for (int64_t j = threadIdx.x; j < cols; j += kBlock) {
      const A xe = Num<T>::widen(xr[j]);
      ss += xe * xe;
      dot += Num<T>::widen(gr[j]) * Num<T>::widen(w[j]) * xe;
    }
    const A ss_total = Reduce(tmp).Sum(ss);
    __syncthreads();  // tmp is reused
    const A dot_total = Reduce(tmp).Sum(dot);
    if (threadIdx.x == 0) {
      const A n = static_cast<A>(cols);
      const A rstd = A(1) / sqrt(ss_total / n + static_cast<A>(eps));
      row_rstd = rstd;
      row_scale = rstd * rstd * dot_total / n;
      rstd_out[r] = rstd;
    }
    __syncthreads();
    const A rstd = row_rstd, scale = row_scale;
    for (int64_t j = threadIdx.x; j < cols; j += kBlock) {
      const A ge = Num<T>::widen(gr[j]) * Num<T>::widen(w[j]);
      gxr[j] = Num<T>::narrow(static_cast<A>(rstd * (ge - Num<T>::widen(xr[j]) * scale)));
    }
    __syncthreads();
  }
}

// grad_weight, part 1: one thread per column and chunk of rows (blockIdx.y), summing g * x * rstd.
template <class T, class A>
__global__ void __launch_bounds__(kBlock)
    bwd_weight_partial_kernel(const T* __restrict__ g, const T* __restrict__ x, const A* __restrict__ rstd,
                              A* __restrict__ partial, int64_t rows, int64_t cols, int64_t rows_per_chunk) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (j >= cols) return;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  A acc = 0;
  for (int64_t r = first; r < last; ++r) acc += Num<T>::widen(g[r * cols + j]) * Num<T>::widen(x[r * cols + j]) * rstd[r];
  partial[static_cast<int64_t>(blockIdx.y) * cols + j] = acc;
}

// grad_weight, part 2: the chunks' partial sums, added in chunk order.
template <class T, class A>
__global__ void __launch_bounds__(kBlock)
    bwd_weight_sum_kernel(const A* __restrict__ partial, T* __restrict__ gw, int64_t n_chunks, int64_t cols) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (j >= cols) return;
  A acc = 0;
  for (int64_t c = 0; c < n_chunks; ++c) acc += partial[c * cols + j];
  gw[j] = Num<T>::narrow(acc);
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 65535)); }
unsigned column_blocks(int64_t cols) { return static_cast<unsigned>((cols + kBlock - 1) / kBlock); }

}  // namespace

int fwd_cuda(DType dt, const void* x, const void* w, void* y, int64_t rows, int64_t cols, double eps, void* stream) {
  if (rows == 0 || cols == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    fwd_kernel<T><<<row_blocks(rows), kBlock, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                                       static_cast<T*>(y), rows, cols, eps);
  });
  return static_cast<int>(cudaGetLastError());
}

int bwd_cuda(DType dt, const void* g, const void* x, const void* w, void* gx, void* gw, void* scratch, int64_t rows,
             int64_t cols, double eps, void* stream) {
  if (cols == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t n_chunks = chunks(rows), per_chunk = chunk_rows(rows);
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    using A = typename Num<T>::Acc;
    A* rstd = static_cast<A*>(scratch);
    A* partial = rstd + rows;
    if (rows > 0) {
      bwd_rows_kernel<T, A><<<row_blocks(rows), kBlock, 0, s>>>(static_cast<const T*>(g), static_cast<const T*>(x),
                                                                 static_cast<const T*>(w), static_cast<T*>(gx), rstd,
                                                                 rows, cols, eps);
    }
    const dim3 grid(column_blocks(cols), static_cast<unsigned>(n_chunks));
    bwd_weight_partial_kernel<T, A><<<grid, kBlock, 0, s>>>(static_cast<const T*>(g), static_cast<const T*>(x),
                                                             rstd, partial, rows, cols, per_chunk);
    bwd_weight_sum_kernel<T, A><<<column_blocks(cols), kBlock, 0, s>>>(partial, static_cast<T*>(gw), n_chunks, cols);
  });
  return static_cast<int>(cudaGetLastError());
}

}  // namespace dbench::kernels::rmsnorm

#else  // the CPU kernels (and without CUDA, the CUDA entry points' stubs)

namespace dbench::kernels::rmsnorm {
namespace {

// Accumulate in double for every dtype: the CPU path doubles as a reference.
template <class T>
double wide(T v) {
  return static_cast<double>(Num<T>::widen(v));
}

template <class T>
T store(double v) {
  return Num<T>::narrow(static_cast<typename Num<T>::Acc>(v));
}

}  // namespace

void fwd_cpu(DType dt, const void* x, const void* w, void* y, int64_t rows, int64_t cols, double eps) {
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* wv = static_cast<const T*>(w);
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = static_cast<const T*>(x) + r * cols;
      T* yr = static_cast<T*>(y) + r * cols;
      double ss = 0.0;
      for (int64_t j = 0; j < cols; ++j) ss += wide(xr[j]) * wide(xr[j]);
      const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
      for (int64_t j = 0; j < cols; ++j) yr[j] = store<T>(wide(xr[j]) * rstd * wide(wv[j]));
    }
  });
}

void bwd_cpu(DType dt, const void* g, const void* x, const void* w, void* gx, void* gw, int64_t rows, int64_t cols,
             double eps) {
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* wv = static_cast<const T*>(w);
    std::vector<double> gw_acc(static_cast<size_t>(cols), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const T* gr = static_cast<const T*>(g) + r * cols;
      const T* xr = static_cast<const T*>(x) + r * cols;
      T* gxr = static_cast<T*>(gx) + r * cols;
      double ss = 0.0, dot = 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        ss += wide(xr[j]) * wide(xr[j]);
        dot += wide(gr[j]) * wide(wv[j]) * wide(xr[j]);
      }
      const double n = static_cast<double>(cols);
      const double rstd = 1.0 / std::sqrt(ss / n + eps), scale = rstd * rstd * dot / n;
      for (int64_t j = 0; j < cols; ++j) {
        gxr[j] = store<T>(rstd * (wide(gr[j]) * wide(wv[j]) - wide(xr[j]) * scale));
        gw_acc[static_cast<size_t>(j)] += wide(gr[j]) * wide(xr[j]) * rstd;
      }
    }
    T* gwv = static_cast<T*>(gw);
    for (int64_t j = 0; j < cols; ++j) gwv[j] = store<T>(gw_acc[static_cast<size_t>(j)]);
  });
}

#if !defined(DBENCH_CUDA_KERNELS)
int fwd_cuda(DType, const void*, const void*, void*, int64_t, int64_t, double, void*) { return -1; }
int bwd_cuda(DType, const void*, const void*, const void*, void*, void*, void*, int64_t, int64_t, double, void*) {
  return -1;
}
#endif

}  // namespace dbench::kernels::rmsnorm

#endif  // __CUDACC__
#endif  // DBENCH_NATIVE_KERNELS
