// Reference-quality CPU kernels: single-threaded loops, so the boundary table
// on a CPU measures the dispatch path rather than a thread pool.
#include <cmath>

#include "dispatch.h"
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

}  // namespace dbench::kernels
