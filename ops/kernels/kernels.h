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

// Elementwise and row-wise ops take kFloat32/kFloat64; mm also takes the 16-bit types.
enum class DType : int { kFloat32 = 0, kFloat64 = 1, kFloat16 = 2, kBFloat16 = 3 };

inline int dtype_size(DType dt) {
  return dt == DType::kFloat64 ? 8 : dt == DType::kFloat32 ? 4 : 2;
}

// Offsets index width: kAuto picks int32 when all offsets fit.
enum class IndexWidth : int { kAuto = 0, kInt32 = 32, kInt64 = 64 };

inline bool fits_int32(int64_t reachable_elements) {
  return reachable_elements <= INT32_MAX;
}

// ---- Elementwise path selection (host, torch-free) ---------------------------
// The CUDA elementwise kernels have two signatures: a vector path moving 16 bytes per
// access (float4 / double2), taken when every pointer is 16-byte aligned (a tensor's
// storage offset included), and a general scalar path for anything else. Both handle
// any n. The launch code and the tests call these same predicates.
inline constexpr int kVectorBytes = 16;

inline int vector_width(DType dt) { return kVectorBytes / dtype_size(dt); }

inline bool aligned16(const void* const* ptrs, int n_ptrs) {
  for (int i = 0; i < n_ptrs; ++i) {
    if (reinterpret_cast<uintptr_t>(ptrs[i]) % kVectorBytes != 0) return false;
  }
  return true;
}

inline bool vector_path_ok(const void* const* ptrs, int n_ptrs, int64_t n, DType dt) {
  return n >= vector_width(dt) && aligned16(ptrs, n_ptrs);  // n < width: nothing to vectorise
}

// Row-wise kernels (l2norm) also need every row start aligned: cols a multiple of the width.
inline bool rows_vector_path_ok(const void* const* ptrs, int n_ptrs, int64_t cols, DType dt) {
  return cols % vector_width(dt) == 0 && vector_path_ok(ptrs, n_ptrs, cols, dt);
}

// mm's tensor-core kernel copies 16-byte chunks of rows (cp.async): every row of a
// (k elements), b and out (n elements) must start 16-byte aligned. Otherwise the
// same kernel fills its tiles element by element with bounds checks.
inline bool mm_chunked_path_ok(const void* a, const void* b, const void* out, int64_t k, int64_t n, DType dt) {
  const void* ptrs[] = {a, b, out};
  const int chunk = kVectorBytes / dtype_size(dt);
  return k % chunk == 0 && n % chunk == 0 && aligned16(ptrs, 3);
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
// mm: out[m, n] = a[m, k] @ b[k, n], all row-major and contiguous. float16/bfloat16
// accumulate in float32 and round once to the input type; float32/float64 in double.
void mm_cpu(DType dt, const void* a, const void* b, void* out, int64_t m, int64_t k, int64_t n);

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
// float16/bfloat16: a tiled tensor-core kernel (mma.sync, fp32 accumulation) on
// compute capability >= 8.0; float32/float64 (and older GPUs): a tiled FMA kernel.
int mm_cuda(DType dt, const void* a, const void* b, void* out, int64_t m, int64_t k, int64_t n,
            void* stream);
const char* cuda_error_string(int code);

}  // namespace dbench::kernels
