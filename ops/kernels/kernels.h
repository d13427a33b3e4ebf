// Torch-free kernel ABI shared by every variant.
//
// Each op has one CPU kernel and one CUDA kernel; every registration variant
// (pybind launcher, TORCH_LIBRARY, stable ABI, Python wrappers) reaches them
// through these functions, so the variants differ only in their boundary.
// Pointers are raw and the index width is chosen here: the 32-bit
// specialisation is used whenever every reachable offset fits in int32.
#pragma once

#include <cstdint>

namespace dbench::kernels {

enum class DType : int { kFloat32 = 0, kFloat64 = 1 };

// Offsets index width: kAuto picks int32 when all offsets fit.
enum class IndexWidth : int { kAuto = 0, kInt32 = 32, kInt64 = 64 };

inline bool fits_int32(int64_t reachable_elements) {
  return reachable_elements <= INT32_MAX;
}

// ---- CPU ------------------------------------------------------------------
// noop: out[i] = x[i]; the cheapest kernel that still defines every output.
void noop_cpu(DType dt, const void* x, void* out, int64_t n);
// muladd: out[i] = a[i] * b[i] + c[i].
void muladd_cpu(DType dt, const void* a, const void* b, const void* c, void* out, int64_t n);
// l2norm: y[r, :] = x[r, :] / sqrt(sum(x[r, :]^2) + eps).
void l2norm_fwd_cpu(DType dt, const void* x, void* y, int64_t rows, int64_t cols, double eps);
// Backward: gx = rstd * (g - y * sum(g * y)), recomputing rstd and y from x.
void l2norm_bwd_cpu(DType dt, const void* grad, const void* x, void* grad_x, int64_t rows,
                    int64_t cols, double eps);

// ---- CUDA -----------------------------------------------------------------
// Launch on `stream` (a cudaStream_t) without synchronising; return the
// cudaError_t of the launch (0 on success). Defined only in CUDA builds.
bool cuda_kernels_available();
int noop_cuda(DType dt, const void* x, void* out, int64_t n, void* stream,
              IndexWidth width = IndexWidth::kAuto);
int muladd_cuda(DType dt, const void* a, const void* b, const void* c, void* out, int64_t n,
                void* stream, IndexWidth width = IndexWidth::kAuto);
int l2norm_fwd_cuda(DType dt, const void* x, void* y, int64_t rows, int64_t cols, double eps,
                    void* stream, IndexWidth width = IndexWidth::kAuto);
int l2norm_bwd_cuda(DType dt, const void* grad, const void* x, void* grad_x, int64_t rows,
                    int64_t cols, double eps, void* stream, IndexWidth width = IndexWidth::kAuto);
const char* cuda_error_string(int code);

}  // namespace dbench::kernels
