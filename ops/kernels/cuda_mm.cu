// mm on CUDA: out[M, N] = a[M, K] @ b[K, N], row-major, on the caller's stream.
//
// float16 / bfloat16 on compute capability 9.0, when the build has the sm_90a kernel
//   (DBENCH_MM_SM90A) and every row starts 16-byte aligned: the warpgroup (wgmma) kernel of
//   cuda_mm_sm90.cu (select_kernel below; DBENCH_MM_KERNEL forces either tensor-core kernel).
// float16 / bfloat16 otherwise (compute capability >= 8.0): a tiled mma.sync tensor-core kernel.
//   CTA tile 128 x 256 x 32, 8 warps as 2 x 4, each warp 64 x 64 (4 x 8 mma tiles of
//   m16n8k16, fp32 accumulators in registers). Shared memory holds kStages = 4 stages
//   of A (128 x 32) and B (32 x 256) tiles, 96 KiB, filled by cp.async 16-byte copies
//   (zero-filled past the matrix edges) kStages - 1 tiles ahead of the tensor cores;
//   fragments come from shared memory through ldmatrix (.trans for B, stored k-major).
//   Both tiles are XOR-swizzled so that ldmatrix and cp.async are free of bank
//   conflicts. CTAs are rasterised in groups of 8 tile rows for L2 reuse of B.
//   Rows that do not start 16-byte aligned (K or N not a multiple of 8, or an
//   offset base pointer) take the same kernel with element-wise, bounds-checked tile
//   loads (kChunked = false): correct for any size, slower.
// float32 / float64 (and the 16-bit types below compute capability 8.0): a 64 x 64
//   shared-memory tiled FMA kernel, 4 x 4 outputs per thread, accumulating in the
//   input type (float for the 16-bit types).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels.h"
#include "mm_device.cuh"
#include "numeric.h"
#ifdef DBENCH_MM_SM90A
#include "mm_sm90.h"
#endif

namespace dbench::kernels {
namespace {

using namespace mmdev;

// ---------------------------------------------------------------------------
// Tensor-core kernel.

constexpr int kBM = 128, kBN = 256, kBK = 32, kStages = 4;
constexpr int kWarpsM = 2, kWarpsN = 4, kTcThreads = 32 * kWarpsM * kWarpsN;
constexpr int kWM = kBM / kWarpsM, kWN = kBN / kWarpsN;  // 64 x 64 per warp
constexpr int kFragsM = kWM / 16, kFragsN = kWN / 8;      // m16n8k16 tiles per warp
constexpr int kChunk = 8;                                 // 16-bit elements per 16-byte chunk
constexpr int kAStage = kBM * kBK, kBStage = kBK * kBN;   // elements per stage
constexpr int kTcSmemBytes = kStages * (kAStage + kBStage) * 2;
constexpr int kGroupM = 8;                                // tile rows per rasterisation group
static_assert(kBK == 32, "the A swizzle below assumes 4 chunks per tile row");
static_assert(kBN / kChunk % 8 == 0, "the B swizzle permutes chunks in groups of 8");
static_assert(kBM * kBK / kChunk % kTcThreads == 0 && kBK * kBN / kChunk % kTcThreads == 0,
              "every thread copies the same number of chunks");

// A tile [kBM][kBK]: a row is 4 chunks (64 bytes), so 8 consecutive rows at one chunk
// would hit 2 of the 8 16-byte bank groups; XOR with (row / 2) % 4 spreads them over all 8.
struct ASwizzle {
  __device__ static int offset(int row, int chunk) { return row * kBK + ((chunk ^ ((row >> 1) & 3)) * kChunk); }
};
// B tile [kBK][kBN]: rows are 512 bytes apart (one bank group); XOR with k % 8.
struct BSwizzle {
  __device__ static int offset(int k, int chunk) { return k * kBN + ((chunk ^ (k & 7)) * kChunk); }
};

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a (16 x 16, row) * b (16 x 8, col), fp32 accumulators.
template <bool kBf16>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// One chunk (8 elements of a row) of a tile: cp.async, or bounds-checked element loads.
template <bool kChunked>
__device__ __forceinline__ void load_chunk(uint16_t* smem, const uint16_t* row, int64_t col, int64_t cols, bool row_ok) {
  if constexpr (kChunked) {
    const bool ok = row_ok && col < cols;  // cols % 8 == 0: a chunk is all in or all out
    cp_async16(smem_addr(smem), ok ? row + col : row, ok ? 16 : 0);
  } else {
    alignas(16) uint16_t v[kChunk];
#pragma unroll
    for (int e = 0; e < kChunk; ++e) v[e] = row_ok && col + e < cols ? row[col + e] : uint16_t{0};
    *reinterpret_cast<uint4*>(smem) = *reinterpret_cast<const uint4*>(v);
  }
}

// A kRows x kCols tile of a row-major [rows, cols] matrix, from (r0, c0), into swizzled smem.
template <bool kChunked, int kRows, int kCols, class Swizzle>
__device__ __forceinline__ void load_tile(uint16_t* smem, const uint16_t* __restrict__ src, int64_t rows,
                                          int64_t cols, int64_t r0, int64_t c0) {
  constexpr int kChunks = kCols / kChunk;
#pragma unroll
  for (int i = 0; i < kRows * kChunks / kTcThreads; ++i) {
    const int q = threadIdx.x + i * kTcThreads;
    const int r = q / kChunks, c = q % kChunks;
    const int64_t row = r0 + r;
    const bool row_ok = row < rows;
    load_chunk<kChunked>(smem + Swizzle::offset(r, c), src + (row_ok ? row : 0) * cols, c0 + c * kChunk, cols, row_ok);
  }
}

// One stage: A[m0:m0+kBM, k0:k0+kBK] and B[k0:k0+kBK, n0:n0+kBN].
template <bool kChunked>
__device__ __forceinline__ void load_tiles(uint16_t* sa, uint16_t* sb, const uint16_t* __restrict__ a,
                                           const uint16_t* __restrict__ b, int64_t m, int64_t k, int64_t n,
                                           int64_t m0, int64_t n0, int64_t k0) {
  load_tile<kChunked, kBM, kBK, ASwizzle>(sa, a, m, k, m0, k0);
  load_tile<kChunked, kBK, kBN, BSwizzle>(sb, b, k, n, k0, n0);
}

template <bool kBf16, bool kChunked>
__global__ void __launch_bounds__(kTcThreads, 1)
    mm_tc_kernel(const uint16_t* __restrict__ a, const uint16_t* __restrict__ b, uint16_t* __restrict__ out,
                 int64_t m, int64_t k, int64_t n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem_raw[];
  uint16_t* smem_a = reinterpret_cast<uint16_t*>(smem_raw);
  uint16_t* smem_b = smem_a + kStages * kAStage;

  const TileOrigin tile = tile_origin(blockIdx.x, m, n, kBM, kBN, kGroupM);
  const int64_t m0 = tile.m0, n0 = tile.n0;

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warp_m = warp / kWarpsN, warp_n = warp % kWarpsN;

  float acc[kFragsM][kFragsN][4];
#pragma unroll
  for (int i = 0; i < kFragsM; ++i)
#pragma unroll
    for (int j = 0; j < kFragsN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  const int k_tiles = static_cast<int>((k + kBK - 1) / kBK);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_tiles<kChunked>(smem_a + s * kAStage, smem_b + s * kBStage, a, b, m, k, n, m0, n0, int64_t{s} * kBK);
    cp_async_commit();
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();  // tile kt has landed (this thread's copies)...
    __syncthreads();               // ...everyone's, and stage (kt - 1) % kStages is free
    const int next = kt + kStages - 1;
    if (next < k_tiles) {
      const int s = next % kStages;
      load_tiles<kChunked>(smem_a + s * kAStage, smem_b + s * kBStage, a, b, m, k, n, m0, n0, int64_t{next} * kBK);
    }
    cp_async_commit();

    const uint16_t* sa = smem_a + (kt % kStages) * kAStage;
    const uint16_t* sb = smem_b + (kt % kStages) * kBStage;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      uint32_t af[kFragsM][4];
      uint32_t bf[kFragsN][2];
#pragma unroll
      for (int i = 0; i < kFragsM; ++i) {
        // Lanes 0-15 address rows 0-15 at k 0-7, lanes 16-31 the same rows at k 8-15.
        const int row = warp_m * kWM + i * 16 + lane % 16;
        ldmatrix_x4(af[i], smem_addr(sa + ASwizzle::offset(row, kk * 2 + lane / 16)));
      }
#pragma unroll
      for (int j = 0; j < kFragsN / 2; ++j) {
        // Two n8 tiles: lanes 0-7 / 8-15 address k 0-7 / 8-15 of the first, 16-31 the second.
        const int kr = kk * 16 + lane % 16;
        uint32_t r[4];
        ldmatrix_x4_trans(r, smem_addr(sb + BSwizzle::offset(kr, (warp_n * kWN + j * 16) / kChunk + lane / 16)));
        bf[2 * j][0] = r[0];
        bf[2 * j][1] = r[1];
        bf[2 * j + 1][0] = r[2];
        bf[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < kFragsM; ++i)
#pragma unroll
        for (int j = 0; j < kFragsN; ++j) mma16816<kBf16>(acc[i][j], af[i], bf[j]);
    }
  }

  // Epilogue: each thread holds rows g and g + 8, columns 2t and 2t + 1 of every mma tile.
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragsN; ++j) {
      const int64_t col = n0 + warp_n * kWN + j * 8 + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = m0 + warp_m * kWM + i * 16 + g + 8 * h;
        store_pair<kBf16>(out, m, n, row, col, acc[i][j][2 * h], acc[i][j][2 * h + 1], kChunked);
      }
    }
  }
#else
  __trap();  // the host never launches it below sm_80
#endif
}

// Raises the kernel's dynamic shared-memory limit once per device (it is per device).
template <class Kernel>
cudaError_t allow_smem(Kernel kernel, int device, std::atomic<uint64_t>& done) {
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit && (done.load(std::memory_order_acquire) & bit)) return cudaSuccess;
  const cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kTcSmemBytes);
  if (status == cudaSuccess && bit) done.fetch_or(bit, std::memory_order_acq_rel);
  return status;
}

template <bool kBf16, bool kChunked>
cudaError_t launch_tc(const void* a, const void* b, void* out, int64_t m, int64_t k, int64_t n, int device,
                      cudaStream_t stream) {
  static std::atomic<uint64_t> smem_set{0};
  const auto kernel = mm_tc_kernel<kBf16, kChunked>;
  if (const cudaError_t status = allow_smem(kernel, device, smem_set); status != cudaSuccess) return status;
  const int64_t tiles = ((m + kBM - 1) / kBM) * ((n + kBN - 1) / kBN);
  if (tiles > INT32_MAX) return cudaErrorInvalidValue;
  kernel<<<static_cast<unsigned>(tiles), kTcThreads, kTcSmemBytes, stream>>>(
      static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), static_cast<uint16_t*>(out), m, k, n);
  return cudaGetLastError();
}

// ---------------------------------------------------------------------------
// FMA kernel: float32 / float64, and the 16-bit types where there are no tensor cores.

constexpr int kFmaTile = 64, kFmaBK = 16, kFmaThreads = 256, kFmaPer = 4;  // 16 x 16 threads, 4 x 4 each

// S: the stored element type (numeric.h); products accumulate in Num<S>::Acc.
template <class S>
__global__ void __launch_bounds__(kFmaThreads)
    mm_fma_kernel(const S* __restrict__ a, const S* __restrict__ b, S* __restrict__ out, int64_t m, int64_t k,
                  int64_t n) {
  using A = typename Num<S>::Acc;
  __shared__ A sa[kFmaBK][kFmaTile + 1];  // transposed: k-major, padded against bank conflicts
  __shared__ A sb[kFmaBK][kFmaTile];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kFmaTile, n0 = static_cast<int64_t>(blockIdx.x) * kFmaTile;
  A acc[kFmaPer][kFmaPer] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kFmaBK) {
#pragma unroll
    for (int l = 0; l < kFmaTile * kFmaBK / kFmaThreads; ++l) {
      const int q = threadIdx.x + l * kFmaThreads;
      const int ar = q / kFmaBK, ac = q % kFmaBK;  // A: 64 rows x 16 k
      const int64_t gr = m0 + ar, gk = k0 + ac;
      sa[ac][ar] = gr < m && gk < k ? Num<S>::widen(a[gr * k + gk]) : A{0};
      const int br = q / kFmaTile, bc = q % kFmaTile;  // B: 16 k x 64 columns
      const int64_t bk = k0 + br, bn = n0 + bc;
      sb[br][bc] = bk < k && bn < n ? Num<S>::widen(b[bk * n + bn]) : A{0};
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kFmaBK; ++kk) {
      A av[kFmaPer], bv[kFmaPer];
#pragma unroll
      for (int i = 0; i < kFmaPer; ++i) av[i] = sa[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < kFmaPer; ++j) bv[j] = sb[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < kFmaPer; ++i)
#pragma unroll
        for (int j = 0; j < kFmaPer; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kFmaPer; ++i) {
    const int64_t row = m0 + ty + 16 * i;
#pragma unroll
    for (int j = 0; j < kFmaPer; ++j) {
      const int64_t col = n0 + tx + 16 * j;
      if (row < m && col < n) out[row * n + col] = Num<S>::narrow(acc[i][j]);
    }
  }
}

template <class S>
cudaError_t launch_fma(const void* a, const void* b, void* out, int64_t m, int64_t k, int64_t n, cudaStream_t stream) {
  const int64_t gx = (n + kFmaTile - 1) / kFmaTile, gy = (m + kFmaTile - 1) / kFmaTile;
  if (gx > INT32_MAX || gy > 65535) return cudaErrorInvalidValue;
  mm_fma_kernel<S><<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), kFmaThreads, 0, stream>>>(
      static_cast<const S*>(a), static_cast<const S*>(b), static_cast<S*>(out), m, k, n);
  return cudaGetLastError();
}

// DBENCH_MM_KERNEL picks the 16-bit kernel: unset, empty or "auto" the wgmma kernel where it can
// run (an sm_90a build on compute capability 9.0, 16-byte aligned rows), else the mma.sync
// kernel; "mma_sync" that kernel always; "wgmma" the Hopper kernel, refused where the build or
// the device lacks it (rows that are not 16-byte aligned still take the mma.sync kernel's
// element-wise loads). Read on every call, cheap beside a matrix product, so a test or a
// benchmark can switch it in-process.
enum class MmChoice { kAuto, kMmaSync, kWgmma, kUnknown };
MmChoice mm_choice() {
  const char* v = std::getenv("DBENCH_MM_KERNEL");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return MmChoice::kAuto;
  if (std::strcmp(v, "mma_sync") == 0) return MmChoice::kMmaSync;
  if (std::strcmp(v, "wgmma") == 0) return MmChoice::kWgmma;
  return MmChoice::kUnknown;
}

constexpr bool kWgmmaBuilt =
#ifdef DBENCH_MM_SM90A
    true;
#else
    false;
#endif

// The one definition of which kernel runs (mm_cuda launches it, mm_kernel_cuda reports it).
int select_kernel(DType dt, const void* a, const void* b, const void* out, int64_t k, int64_t n, MmKernel* kernel,
                  int* device) {
  const MmChoice choice = mm_choice();
  if (choice == MmChoice::kUnknown) return kMmKernelUnknown;
  if (const cudaError_t s = cudaGetDevice(device); s != cudaSuccess) return s;
  if (dt == DType::kFloat32 || dt == DType::kFloat64) {
    *kernel = MmKernel::kFma;
    return 0;
  }
  int major = 0, minor = 0;
  if (const cudaError_t s = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, *device); s != cudaSuccess) {
    return s;
  }
  if (const cudaError_t s = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, *device); s != cudaSuccess) {
    return s;
  }
  const bool wgmma_runs = kWgmmaBuilt && major == 9 && minor == 0;  // sm_90a code runs on 9.0 alone
  if (choice == MmChoice::kWgmma && !wgmma_runs) return kMmWgmmaUnavailable;
  const bool chunked = mm_chunked_path_ok(a, b, out, k, n, dt);
  if (chunked && wgmma_runs && choice != MmChoice::kMmaSync) *kernel = MmKernel::kWgmma;
  else if (major < 8) *kernel = MmKernel::kFma;
  else *kernel = chunked ? MmKernel::kMmaSync : MmKernel::kMmaSyncElementwise;
  return 0;
}

template <class S>
int launch_kernel(MmKernel kernel, const void* a, const void* b, void* out, int64_t m, int64_t k, int64_t n, int device,
                  cudaStream_t stream) {
  constexpr bool kBf16 = std::is_same_v<S, BFloat16>;
  switch (kernel) {
    case MmKernel::kWgmma:
#ifdef DBENCH_MM_SM90A
      if constexpr (std::is_same_v<S, BFloat16> || std::is_same_v<S, Float16>) {
        return mm_sm90(kBf16, a, b, out, m, k, n, device, stream);
      }
#endif
      break;
    case MmKernel::kMmaSync:
      if constexpr (std::is_same_v<S, BFloat16> || std::is_same_v<S, Float16>) {
        return launch_tc<kBf16, true>(a, b, out, m, k, n, device, stream);
      }
      break;
    case MmKernel::kMmaSyncElementwise:
      if constexpr (std::is_same_v<S, BFloat16> || std::is_same_v<S, Float16>) {
        return launch_tc<kBf16, false>(a, b, out, m, k, n, device, stream);
      }
      break;
    case MmKernel::kFma: return launch_fma<S>(a, b, out, m, k, n, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

int mm_kernel_cuda(DType dt, const void* a, const void* b, const void* out, int64_t k, int64_t n, MmKernel* kernel) {
  int device = 0;
  return select_kernel(dt, a, b, out, k, n, kernel, &device);
}

int mm_cuda(DType dt, const void* a, const void* b, void* out, int64_t m, int64_t k, int64_t n, void* stream) {
  MmKernel kernel{};
  int device = 0;
  if (const int s = select_kernel(dt, a, b, out, k, n, &kernel, &device); s != 0) return s;
  if (m == 0 || n == 0) return 0;  // no output element; k == 0 writes zeros
  const auto s = static_cast<cudaStream_t>(stream);
  switch (dt) {
    case DType::kFloat32: return launch_kernel<float>(kernel, a, b, out, m, k, n, device, s);
    case DType::kFloat64: return launch_kernel<double>(kernel, a, b, out, m, k, n, device, s);
    case DType::kFloat16: return launch_kernel<Float16>(kernel, a, b, out, m, k, n, device, s);
    case DType::kBFloat16: return launch_kernel<BFloat16>(kernel, a, b, out, m, k, n, device, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace dbench::kernels
