// Torch-free kernel ABI shared by every variant.
//
// Each op has one CPU kernel and one CUDA kernel; every registration variant
// (pybind launcher, TORCH_LIBRARY, stable ABI, Python wrappers) reaches them
// through these functions, so the variants differ only in their boundary.
// Pointers are raw and the index width is chosen here: the 32-bit
// specialisation is used whenever every reachable offset fits in int32.
#pragma once

#include <climits>
#include <cstdint>

namespace dbench::kernels {

// Every op takes all four; the elementwise and row-wise kernels compute float16/bfloat16 in
// float and round once on store (numeric.h), mm accumulates them in float32.
enum class DType : int { kFloat32 = 0, kFloat64 = 1, kFloat16 = 2, kBFloat16 = 3 };

inline int dtype_size(DType dt) {
  return dt == DType::kFloat64 ? 8 : dt == DType::kFloat32 ? 4 : 2;
}

// ---- Index width (host, torch-free) ------------------------------------------
// Every CUDA and CPU kernel has an int32 and an int64 specialisation of its offset
// arithmetic. kAuto takes int32 when every offset fits; a caller may force either, and
// the launchers refuse a forced int32 that does not fit (index_width below) before any
// work. In the int64 kernels every index is widened before its first multiply.
enum class IndexWidth : int { kAuto = 0, kInt32 = 32, kInt64 = 64 };

inline bool fits_int32(int64_t reachable_elements) {
  return reachable_elements <= INT32_MAX;
}

// Whether one tensor argument's view is addressable with int32 offsets: the largest
// element offset it reaches (storage offset + sum of (size - 1) * |stride|) fits, and so
// does every stride itself -- a size-one dimension may carry a stride past INT32_MAX that
// it never reaches but that a kernel taking strides would still have to represent.
// An empty view reaches nothing. Overflow-safe for any int64 input.
inline bool view_fits_int32(const int64_t* sizes, const int64_t* strides, int ndim, int64_t storage_offset) {
  if (storage_offset < 0 || storage_offset > INT32_MAX) return false;
  for (int d = 0; d < ndim; ++d) {
    if (strides[d] > INT32_MAX || strides[d] < -INT32_MAX || sizes[d] > INT32_MAX) return false;
  }
  int64_t reach = storage_offset;
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] == 0) return true;
    const int64_t stride = strides[d] < 0 ? -strides[d] : strides[d];
    reach += (sizes[d] - 1) * stride;  // each term < 2^62: no overflow before the check
    if (reach > INT32_MAX) return false;
  }
  return true;
}

// Launch geometry shared by the CUDA launches and the index-width choice.
inline constexpr int kThreads = 256;
inline constexpr int kMaxBlocks = 65535;
inline constexpr int kUnroll = 4;  // independent accesses per thread and input in flight

inline int blocks_for(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b);
}
// Threads enough for kUnroll accesses each, the scalar path (width 1) getting the most.
inline int elementwise_blocks(int64_t n, int width) { return blocks_for((n / width + kUnroll - 1) / kUnroll); }

// The largest index a kernel's own loops compute, so that no index arithmetic overflows:
// elementwise, i + (kUnroll - 1) * stride with i up to n + kUnroll * stride, and the tail
// (bounded with the scalar path's grid, the largest); row-wise, the last element plus a block,
// and the row counter's last step (rows + one row per warp of the largest grid).
inline constexpr int kWarpsPerBlock = kThreads / 32;
inline int64_t elementwise_reach(int64_t n) {
  return n + int64_t{2 * kUnroll + 1} * kThreads * elementwise_blocks(n, 1);
}
inline int64_t rowwise_reach(int64_t rows, int64_t cols) {
  return rows * cols + kThreads + int64_t{kMaxBlocks} * kWarpsPerBlock;
}

// int32 or int64 (never kAuto) for a launch whose own loops reach `kernel_reach` and
// whose arguments' views all fit (`views_fit`), or kAuto when int32 was forced and does
// not fit: the caller refuses that launch.
inline IndexWidth resolve_index(IndexWidth requested, bool views_fit, int64_t kernel_reach) {
  const bool ok32 = views_fit && fits_int32(kernel_reach);
  if (requested == IndexWidth::kInt64) return IndexWidth::kInt64;
  if (requested == IndexWidth::kInt32) return ok32 ? IndexWidth::kInt32 : IndexWidth::kAuto;
  return ok32 ? IndexWidth::kInt32 : IndexWidth::kInt64;
}

inline const char* index_name(IndexWidth w) {
  return w == IndexWidth::kInt32 ? "int32" : w == IndexWidth::kInt64 ? "int64" : "auto";
}

// ---- Elementwise path selection (host, torch-free) ---------------------------
// The CUDA elementwise kernels have two signatures: a vector path moving 16 bytes per
// access (4 floats, 2 doubles, 8 float16/bfloat16), taken when every pointer is 16-byte
// aligned (a tensor's storage offset included), and a general scalar path for anything
// else. Both handle any n. The launch code and the tests call these same predicates.
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

// l2norm's forward has two row schedules on CUDA. kWarp: one warp per row, the row's accesses
// (16-byte packs on the vector path, single elements otherwise) held in registers between the
// sum of squares and the scaling, so the row is read once and no block barrier is needed; it
// takes rows of at most 32 * kWarpRowPacks accesses. kBlock: one block per row, any length
// (the row is read twice). kAuto takes kWarp whenever the row fits; a forced kWarp that does not
// fit is refused by the launchers. The CPU kernel has one schedule and ignores the choice.
enum class RowPath : int { kAuto = 0, kWarp = 1, kBlock = 2 };
inline constexpr int kWarpRowPacks = 8;  // accesses per lane: 8 x 16 bytes in flight per lane

// Accesses per lane the warp schedule needs for rows of `cols` elements taken `width` at a time
// (a power of two, 1 .. kWarpRowPacks), or 0 when such a row does not fit in a warp's registers.
inline int warp_row_packs(int64_t cols, int width) {
  const int64_t per_lane = (cols / width + 31) / 32;
  if (per_lane > kWarpRowPacks) return 0;
  int packs = 1;
  while (packs < per_lane) packs *= 2;
  return packs;
}

// The access width and schedule l2norm's forward takes on these pointers (kAuto resolved):
// kWarp when the row fits, else kBlock.
inline int rows_width(const void* const* ptrs, int n_ptrs, int64_t cols, DType dt) {
  return rows_vector_path_ok(ptrs, n_ptrs, cols, dt) ? vector_width(dt) : 1;
}
inline RowPath resolve_row_path(RowPath requested, const void* const* ptrs, int n_ptrs, int64_t cols, DType dt) {
  const bool fits = warp_row_packs(cols, rows_width(ptrs, n_ptrs, cols, dt)) > 0;
  if (requested == RowPath::kBlock) return RowPath::kBlock;
  if (requested == RowPath::kWarp) return fits ? RowPath::kWarp : RowPath::kAuto;  // kAuto: refused
  return fits ? RowPath::kWarp : RowPath::kBlock;
}

inline const char* row_path_name(RowPath p) {
  return p == RowPath::kWarp ? "warp" : p == RowPath::kBlock ? "block" : "auto";
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
// Each takes the offset width too (int32 or int64 loops; kAuto: int32 when n fits), so
// the forced-int64 equivalence can be tested on any machine.
// noop: out[i] = x[i]; the cheapest kernel that still defines every output.
void noop_cpu(DType dt, const void* x, void* out, int64_t n, IndexWidth width = IndexWidth::kAuto);
// muladd: out[i] = a[i] * b[i] + c[i].
void muladd_cpu(DType dt, const void* a, const void* b, const void* c, void* out, int64_t n,
                IndexWidth width = IndexWidth::kAuto);
// l2norm: y[r, :] = x[r, :] / sqrt(sum(x[r, :]^2) + eps).
void l2norm_fwd_cpu(DType dt, const void* x, void* y, int64_t rows, int64_t cols, double eps,
                    IndexWidth width = IndexWidth::kAuto);
// Backward: gx = rstd * (g - y * sum(g * y)), recomputing rstd and y from x.
void l2norm_bwd_cpu(DType dt, const void* grad, const void* x, void* grad_x, int64_t rows,
                    int64_t cols, double eps, IndexWidth width = IndexWidth::kAuto);
// chain (chain.h): out = steps first .. first + k - 1 applied to x; the fused op is
// first = 0, an unfused chain is k calls with k = 1 and first = 0, 1, ..., k - 1.
void chain_cpu(DType dt, const void* x, void* out, int64_t n, int first, int k,
               IndexWidth width = IndexWidth::kAuto);
// gx = g * d(chain of k steps)/dx at x.
void chain_bwd_cpu(DType dt, const void* grad, const void* x, void* grad_x, int64_t n, int k,
                   IndexWidth width = IndexWidth::kAuto);
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
// `path` (kAuto, or forced: kernels.h RowPath) is resolved on the real pointers; a forced kWarp
// that does not fit returns an error without launching.
int l2norm_fwd_cuda(DType dt, const void* x, void* y, int64_t rows, int64_t cols, double eps,
                    void* stream, IndexWidth width = IndexWidth::kAuto, RowPath path = RowPath::kAuto);
int l2norm_bwd_cuda(DType dt, const void* grad, const void* x, void* grad_x, int64_t rows,
                    int64_t cols, double eps, void* stream, IndexWidth width = IndexWidth::kAuto);
// float16/bfloat16 (fp32 accumulation): on compute capability 9.0 in a build with the sm_90a
// kernel, the Hopper warpgroup (wgmma) kernel when every row is 16-byte aligned; else a tiled
// mma.sync kernel on compute capability >= 8.0; float32/float64 (and older GPUs): a tiled FMA
// kernel. DBENCH_MM_KERNEL=mma_sync or =wgmma forces one of the two tensor-core kernels
// (mm_kernel_cuda says which runs).
int mm_cuda(DType dt, const void* a, const void* b, void* out, int64_t m, int64_t k, int64_t n,
            void* stream);
// The kernel mm_cuda launches on the current device for these operands (pointers of a, b and
// the output; the output's may be null for a fresh, aligned one): a status as mm_cuda's.
enum class MmKernel : int { kFma = 0, kMmaSync = 1, kMmaSyncElementwise = 2, kWgmma = 3 };
int mm_kernel_cuda(DType dt, const void* a, const void* b, const void* out, int64_t k, int64_t n, MmKernel* kernel);
inline const char* mm_kernel_name(MmKernel k) {
  switch (k) {
    case MmKernel::kFma: return "fma";
    case MmKernel::kMmaSync: return "mma_sync";
    case MmKernel::kMmaSyncElementwise: return "mma_sync_elementwise";
    case MmKernel::kWgmma: return "wgmma";
  }
  return "unknown";
}
// mm_cuda's status when DBENCH_MM_KERNEL names no kernel, or asks for wgmma where the build or
// the device has none (cuda_error_string says which).
constexpr int kMmKernelUnknown = -2;
constexpr int kMmWgmmaUnavailable = -3;
int chain_cuda(DType dt, const void* x, void* out, int64_t n, int first, int k, void* stream,
               IndexWidth width = IndexWidth::kAuto);
int chain_bwd_cuda(DType dt, const void* grad, const void* x, void* grad_x, int64_t n, int k, void* stream,
                   IndexWidth width = IndexWidth::kAuto);

// What the compiler made of one kernel specialisation (cudaFuncGetAttributes): registers
// and local (spill) bytes per thread. `kernel` is copy, muladd, l2norm (the block schedule),
// l2norm_warp (the warp schedule, `k` accesses per lane: 1, 2, 4 or 8), l2norm_backward, chain or
// chain_backward (`k` the chain length). Returns the cudaError_t (0 on success).
struct KernelAttributes {
  int registers = 0;
  int local_bytes = 0;
  int max_threads = 0;
};
int kernel_attributes(const char* kernel, DType dt, IndexWidth width, bool vector, int k, KernelAttributes* out);

// Busy-waits about `ns` nanoseconds on the GPU (one thread, the global timer): a separate
// kernel of known length (timer validation, sanitizer coverage).
int spin_cuda(int64_t ns, void* stream);
// A known GPU cost inside a case's own kernel, so that a regression gate's power can be
// measured against a true effect with no extra launch: until reset to 0, the forward kernels
// of noop, muladd, l2norm and chain launched from this thread make every thread wait `ns`
// (as SM cycles at the device's rated clock) before their work. Thread-local; the CPU-only
// build ignores it.
void set_launch_delay_ns(int64_t ns);
const char* cuda_error_string(int code);

}  // namespace dbench::kernels
