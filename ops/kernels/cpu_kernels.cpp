// Reference-quality CPU kernels: single-threaded loops, so the boundary table
// on a CPU measures the dispatch path rather than a thread pool.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "dispatch.h"
#include "half_convert.h"
#include "kernels.h"

namespace dbench::kernels {

void noop_cpu(DType dt, const void* x, void* out, int64_t n) {
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(x);
    T* dst = static_cast<T*>(out);
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  });
}

void muladd_cpu(DType dt, const void* a, const void* b, const void* c, void* out, int64_t n) {
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    const T* pc = static_cast<const T*>(c);
    T* po = static_cast<T*>(out);
    for (int64_t i = 0; i < n; ++i) po[i] = pa[i] * pb[i] + pc[i];
  });
}

namespace {
// Accumulate in double for every dtype: the CPU path doubles as a reference.
template <class T>
double row_rstd(const T* row, int64_t cols, double eps) {
  double sumsq = 0.0;
  for (int64_t j = 0; j < cols; ++j) sumsq += static_cast<double>(row[j]) * row[j];
  return 1.0 / std::sqrt(sumsq + eps);
}
}  // namespace

void l2norm_fwd_cpu(DType dt, const void* x, void* y, int64_t rows, int64_t cols, double eps) {
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = static_cast<const T*>(x) + r * cols;
      T* yr = static_cast<T*>(y) + r * cols;
      const double rstd = row_rstd(xr, cols, eps);
      for (int64_t j = 0; j < cols; ++j) yr[j] = static_cast<T>(xr[j] * rstd);
    }
  });
}

void l2norm_bwd_cpu(DType dt, const void* grad, const void* x, void* grad_x, int64_t rows,
                    int64_t cols, double eps) {
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < rows; ++r) {
      const T* gr = static_cast<const T*>(grad) + r * cols;
      const T* xr = static_cast<const T*>(x) + r * cols;
      T* gxr = static_cast<T*>(grad_x) + r * cols;
      const double rstd = row_rstd(xr, cols, eps);
      double dot = 0.0;  // sum(g * y)
      for (int64_t j = 0; j < cols; ++j) dot += static_cast<double>(gr[j]) * xr[j] * rstd;
      for (int64_t j = 0; j < cols; ++j) {
        gxr[j] = static_cast<T>(rstd * (gr[j] - xr[j] * rstd * dot));
      }
    }
  });
}

namespace {

// How mm reads and writes each element type on the CPU, and what it accumulates in:
// double for float32/float64 (the CPU path doubles as a reference), float for the
// 16-bit types (what the tensor cores do).
struct Fp16 {
  using Storage = uint16_t;
  using Acc = float;
  static float load(uint16_t v) { return halfconv::fp16_to_float(v); }
  static uint16_t store(float v) { return halfconv::float_to_fp16(v); }
};
struct Bf16 {
  using Storage = uint16_t;
  using Acc = float;
  static float load(uint16_t v) { return halfconv::bf16_to_float(v); }
  static uint16_t store(float v) { return halfconv::float_to_bf16(v); }
};
template <class T>
struct Plain {
  using Storage = T;
  using Acc = double;
  static double load(T v) { return v; }
  static T store(double v) { return static_cast<T>(v); }
};

// Row i of out accumulates a[i, p] * b[p, :] over p: b is streamed row by row,
// the accumulators (one column block) stay in L1.
template <class E>
void mm_blocked(const void* a, const void* b, void* out, int64_t m, int64_t k, int64_t n) {
  using S = typename E::Storage;
  using Acc = typename E::Acc;
  constexpr int64_t kColBlock = 512;
  const S* pa = static_cast<const S*>(a);
  const S* pb = static_cast<const S*>(b);
  S* po = static_cast<S*>(out);
  std::vector<Acc> acc(static_cast<size_t>(std::min(n, kColBlock)));
  for (int64_t j0 = 0; j0 < n; j0 += kColBlock) {
    const int64_t jn = std::min(kColBlock, n - j0);
    for (int64_t i = 0; i < m; ++i) {
      std::fill(acc.begin(), acc.begin() + jn, Acc{0});
      for (int64_t p = 0; p < k; ++p) {
        const Acc aip = E::load(pa[i * k + p]);
        const S* brow = pb + p * n + j0;
        for (int64_t j = 0; j < jn; ++j) acc[j] += aip * static_cast<Acc>(E::load(brow[j]));
      }
      for (int64_t j = 0; j < jn; ++j) po[i * n + j0 + j] = E::store(acc[j]);
    }
  }
}

}  // namespace

void mm_cpu(DType dt, const void* a, const void* b, void* out, int64_t m, int64_t k, int64_t n) {
  switch (dt) {
    case DType::kFloat32: return mm_blocked<Plain<float>>(a, b, out, m, k, n);
    case DType::kFloat64: return mm_blocked<Plain<double>>(a, b, out, m, k, n);
    case DType::kFloat16: return mm_blocked<Fp16>(a, b, out, m, k, n);
    case DType::kBFloat16: return mm_blocked<Bf16>(a, b, out, m, k, n);
  }
  throw std::invalid_argument("dbench kernels: unsupported dtype code");
}

}  // namespace dbench::kernels
