// Reference-quality CPU kernels: single-threaded loops, so the boundary table
// on a CPU measures the dispatch path rather than a thread pool. float16/bfloat16
// (numeric.h) are widened to float on load and rounded once on store: muladd in
// float, l2norm accumulating in double like the other types; the chain rounds each
// operation (chain.h).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "chain.h"
#include "dispatch.h"
#include "half_convert.h"
#include "kernels.h"
#include "numeric.h"

namespace dbench::kernels {

// Each loop runs in the offset type I the caller chose (visit_index): the int32 and int64
// specialisations are separate code, which the forced-int64 tests compare bit for bit.
void noop_cpu(DType dt, const void* x, void* out, int64_t n, IndexWidth w) {
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    visit_index(w, n, [&](auto index) {
      using I = decltype(index);
      const T* src = static_cast<const T*>(x);
      T* dst = static_cast<T*>(out);
      for (I i = 0; i < static_cast<I>(n); ++i) dst[i] = src[i];
    });
  });
}

void muladd_cpu(DType dt, const void* a, const void* b, const void* c, void* out, int64_t n, IndexWidth w) {
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    visit_index(w, n, [&](auto index) {
      using I = decltype(index);
      using N = Num<T>;
      const T* pa = static_cast<const T*>(a);
      const T* pb = static_cast<const T*>(b);
      const T* pc = static_cast<const T*>(c);
      T* po = static_cast<T*>(out);
      // 16-bit: the product is exact in float, so this is the CUDA kernel's fma, bit for bit.
      for (I i = 0; i < static_cast<I>(n); ++i) po[i] = N::narrow(N::widen(pa[i]) * N::widen(pb[i]) + N::widen(pc[i]));
    });
  });
}

namespace {
// Accumulate in double for every dtype: the CPU path doubles as a reference.
template <class T>
double wide(T v) { return static_cast<double>(Num<T>::widen(v)); }

// The one rounding of a row-wise result to T (through float for the 16-bit types).
template <class T>
T store(double v) { return Num<T>::narrow(static_cast<typename Num<T>::Acc>(v)); }

template <class I, class T>
double row_rstd(const T* row, I cols, double eps) {
  double sumsq = 0.0;
  for (I j = 0; j < cols; ++j) sumsq += wide(row[j]) * wide(row[j]);
  return 1.0 / std::sqrt(sumsq + eps);
}
}  // namespace

void l2norm_fwd_cpu(DType dt, const void* x, void* y, int64_t rows, int64_t cols, double eps, IndexWidth w) {
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    visit_index(w, rows * cols, [&](auto index) {
      using I = decltype(index);
      const I nr = static_cast<I>(rows), nc = static_cast<I>(cols);
      for (I r = 0; r < nr; ++r) {
        const T* xr = static_cast<const T*>(x) + r * nc;
        T* yr = static_cast<T*>(y) + r * nc;
        const double rstd = row_rstd(xr, nc, eps);
        for (I j = 0; j < nc; ++j) yr[j] = store<T>(wide(xr[j]) * rstd);
      }
    });
  });
}

void l2norm_bwd_cpu(DType dt, const void* grad, const void* x, void* grad_x, int64_t rows, int64_t cols, double eps,
                    IndexWidth w) {
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    visit_index(w, rows * cols, [&](auto index) {
      using I = decltype(index);
      const I nr = static_cast<I>(rows), nc = static_cast<I>(cols);
      for (I r = 0; r < nr; ++r) {
        const T* gr = static_cast<const T*>(grad) + r * nc;
        const T* xr = static_cast<const T*>(x) + r * nc;
        T* gxr = static_cast<T*>(grad_x) + r * nc;
        const double rstd = row_rstd(xr, nc, eps);
        double dot = 0.0;  // sum(g * y)
        for (I j = 0; j < nc; ++j) dot += wide(gr[j]) * wide(xr[j]) * rstd;
        for (I j = 0; j < nc; ++j) gxr[j] = store<T>(rstd * (wide(gr[j]) - wide(xr[j]) * rstd * dot));
      }
    });
  });
}

namespace {
void check_chain(int first, int k) {
  if (k < 1 || k > chain::kMaxLength || first < 0 || (first != 0 && k != 1)) {
    throw std::invalid_argument("dbench kernels: chain takes 1..8 steps from step 0, or one step from any");
  }
}
}  // namespace

void chain_cpu(DType dt, const void* x, void* out, int64_t n, int first, int k, IndexWidth w) {
  check_chain(first, k);
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    visit_index(w, n, [&](auto index) {
      using I = decltype(index);
      const T* src = static_cast<const T*>(x);
      T* dst = static_cast<T*>(out);
      const auto run = [&](auto step) {
        for (I i = 0; i < static_cast<I>(n); ++i) dst[i] = step(src[i]);
      };
      if (first == 0) {
        chain::visit_length(k, [&](auto len) { run([](T v) { return chain::apply<0, decltype(len)::value>(v); }); });
      } else {
        chain::visit_step(first, [&](auto s) { run([](T v) { return chain::apply<decltype(s)::value, 1>(v); }); });
      }
    });
  });
}

void chain_bwd_cpu(DType dt, const void* grad, const void* x, void* grad_x, int64_t n, int k, IndexWidth w) {
  check_chain(0, k);
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    visit_index(w, n, [&](auto index) {
      using I = decltype(index);
      const T* g = static_cast<const T*>(grad);
      const T* xs = static_cast<const T*>(x);
      T* gx = static_cast<T*>(grad_x);
      chain::visit_length(k, [&](auto len) {
        for (I i = 0; i < static_cast<I>(n); ++i) gx[i] = chain::apply_backward<decltype(len)::value>(g[i], xs[i]);
      });
    });
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
