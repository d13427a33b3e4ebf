// mm on Hopper (sm_90a): a warpgroup tensor-core (wgmma) kernel for float16 / bfloat16.
//
// Built only for the sm_90a target (CMakeLists.txt: when the CUDA architectures include 90);
// cuda_mm.cu calls it on a compute-capability 9.0 device when every row starts 16-byte
// aligned (K and N multiples of 8, aligned base pointers), else it takes the mma.sync kernel.
//
// CTA tile 128 x 256 x 64, 256 threads = 2 warpgroups, each warpgroup 64 x 256 with one
// wgmma.m64n256k16 per 16 of K (fp32 accumulators in registers, 128 per thread). A and B
// stay in shared memory in the 128-byte-swizzled layouts wgmma reads directly:
//   A [128 rows][64 k], K-major: row r at r * 128 bytes, 16-byte chunk c at c ^ (r % 8);
//   B [4 column blocks][64 k][64 n], N-major (row-major B needs no transpose: the
//     instruction's transpose-B flag): k row at k * 128 bytes in its block, chunk c ^ (k % 8).
// kStages = 4 stages of 48 KiB, filled by every thread's cp.async 16-byte copies two tiles
// ahead; one wgmma group stays in flight while the next is issued, so a stage is refilled
// only after the barrier that follows its wgmma's completion in both warpgroups.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "mm_device.cuh"
#include "mm_sm90.h"

namespace dbench::kernels {
namespace {

using namespace mmdev;

constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4, kPrefetch = kStages - 2;
constexpr int kThreads = 256, kWarpgroups = kThreads / 128;
constexpr int kChunk = 8;                                 // 16-bit elements per 16-byte chunk
constexpr int kABytes = kBM * kBK * 2, kBBytes = kBK * kBN * 2;
constexpr int kStageBytes = kABytes + kBBytes;
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + room to align the base to 1024
constexpr int kBlockBytes = kBK * 64 * 2;                 // one 64-column block of the B tile
constexpr int kGroupM = 8;
static_assert(kBM == 64 * kWarpgroups, "one warpgroup per 64 rows");
static_assert(kBK * 2 == 128, "a tile row is one 128-byte swizzle row");

// wgmma shared-memory descriptor: start address, leading / stride byte offsets (>> 4), and
// bit 62 = the 128-byte swizzle. Tiles start 1024-byte aligned, so the base offset is 0.
__device__ __forceinline__ uint64_t descriptor(uint32_t addr, uint32_t leading, uint32_t stride) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | static_cast<uint64_t>(leading >> 4) << 16 |
         static_cast<uint64_t>(stride >> 4) << 32 | uint64_t{1} << 62;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// cp.async writes through the generic proxy, wgmma reads through the async proxy.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keeps the compiler from moving accumulator reads or writes across the asynchronous MMA.
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

#define DBENCH_WGMMA_M64N256K16(TYPE, d, desc_a, desc_b) \
  asm volatile( \
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " " \
      "{" \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
      "}, %128, %129, p, 1, 1, 0, 1;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
      : "l"(desc_a), "l"(desc_b))

// d (64 x 256 per warpgroup) += A (64 x 16, K-major) * B (16 x 256, N-major).
template <bool kBf16>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (kBf16) DBENCH_WGMMA_M64N256K16("bf16", d, desc_a, desc_b);
  else DBENCH_WGMMA_M64N256K16("f16", d, desc_a, desc_b);
}

// Stage s <- A[m0 : m0 + 128, k0 : k0 + 64] and B[k0 : k0 + 64, n0 : n0 + 256], zero-filled past the
// edges (K and N are multiples of 8 here, so a chunk is all inside or all outside).
__device__ __forceinline__ void load_stage(uint32_t sa, uint32_t sb, const uint16_t* __restrict__ a,
                                           const uint16_t* __restrict__ b, int64_t m, int64_t k, int64_t n,
                                           int64_t m0, int64_t n0, int64_t k0) {
#pragma unroll
  for (int i = 0; i < kBM * (kBK / kChunk) / kThreads; ++i) {
    const int q = threadIdx.x + i * kThreads;
    const int r = q / 8, c = q % 8;
    const int64_t row = m0 + r, col = k0 + c * kChunk;
    const bool ok = row < m && col < k;
    cp_async16(sa + r * 128 + ((c ^ (r & 7)) << 4), ok ? a + row * k + col : a, ok ? 16 : 0);
  }
#pragma unroll
  for (int i = 0; i < kBK * (kBN / kChunk) / kThreads; ++i) {
    const int q = threadIdx.x + i * kThreads;
    const int r = q / 32, c = q % 32;  // k row, chunk along N
    const int64_t row = k0 + r, col = n0 + c * kChunk;
    const bool ok = row < k && col < n;
    cp_async16(sb + (c / 8) * kBlockBytes + r * 128 + (((c % 8) ^ (r & 7)) << 4), ok ? b + row * n + col : b,
               ok ? 16 : 0);
  }
}

template <bool kBf16>
__global__ void __launch_bounds__(kThreads, 1)
    mm_wgmma_kernel(const uint16_t* __restrict__ a, const uint16_t* __restrict__ b, uint16_t* __restrict__ out,
                    int64_t m, int64_t k, int64_t n) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023) & ~uint32_t{1023};
  const auto stage_a = [&](int s) { return base + s * kStageBytes; };
  const auto stage_b = [&](int s) { return base + s * kStageBytes + kABytes; };

  const TileOrigin tile = tile_origin(blockIdx.x, m, n, kBM, kBN, kGroupM);
  const int warpgroup = threadIdx.x / 128;

  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;

  const int k_tiles = static_cast<int>((k + kBK - 1) / kBK);
#pragma unroll
  for (int s = 0; s < kPrefetch; ++s) {
    if (s < k_tiles) load_stage(stage_a(s), stage_b(s), a, b, m, k, n, tile.m0, tile.n0, int64_t{s} * kBK);
    cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kPrefetch - 1>();  // this thread's copies of tile kt have landed...
    fence_proxy_async();             // ...are visible to the tensor cores...
    __syncthreads();                 // ...as are everyone's; and the wgmma of tile kt - 2 is done in both warpgroups
    const int next = kt + kPrefetch;
    if (next < k_tiles) {
      const int s = next % kStages;  // last read by tile kt - 2
      load_stage(stage_a(s), stage_b(s), a, b, m, k, n, tile.m0, tile.n0, int64_t{next} * kBK);
    }
    cp_async_commit();

    const int s = kt % kStages;
#pragma unroll
    for (int i = 0; i < 128; ++i) fence_operand(d[i]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      // A: this warpgroup's 64 rows, 16 k (32 bytes) along the swizzled row; 8-row groups 1024 bytes apart.
      const uint64_t desc_a = descriptor(stage_a(s) + warpgroup * 64 * 128 + kk * 32, 16, 1024);
      // B: 16 k rows (two 8-row groups, 1024 bytes apart); 64-column blocks kBlockBytes apart.
      const uint64_t desc_b = descriptor(stage_b(s) + kk * 16 * 128, kBlockBytes, 1024);
      wgmma_m64n256k16<kBf16>(d, desc_a, desc_b);
    }
    wgmma_commit();
    wgmma_wait<1>();  // tile kt - 1's group is done; tile kt's may still run
#pragma unroll
    for (int i = 0; i < 128; ++i) fence_operand(d[i]);
  }
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < 128; ++i) fence_operand(d[i]);

  // Epilogue: warp w of a warpgroup holds its rows 16 (w % 4) + g and + 8; n8 tile j sits in
  // d[4j .. 4j + 3] (the mma.sync C layout), columns 8j + 2t and + 1.
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
  const int g = lane / 4, t = lane % 4;
  const int64_t row = tile.m0 + warpgroup * 64 + warp * 16 + g;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    const int64_t col = tile.n0 + j * 8 + 2 * t;
    store_pair<kBf16>(out, m, n, row, col, d[4 * j], d[4 * j + 1], true);
    store_pair<kBf16>(out, m, n, row + 8, col, d[4 * j + 2], d[4 * j + 3], true);
  }
#else
  __trap();  // built for sm_90a only; the host launches it on compute capability 9.0 alone
#endif
}

template <bool kBf16>
cudaError_t launch(const void* a, const void* b, void* out, int64_t m, int64_t k, int64_t n, int device,
                   cudaStream_t stream) {
  // The dynamic shared-memory limit is per device: raise it once on each.
  static std::atomic<uint64_t> smem_set{0};
  const auto kernel = mm_wgmma_kernel<kBf16>;
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t{1} << device : 0;
  if (!bit || !(smem_set.load(std::memory_order_acquire) & bit)) {
    const cudaError_t s = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (s != cudaSuccess) return s;
    if (bit) smem_set.fetch_or(bit, std::memory_order_acq_rel);
  }
  const int64_t tiles = ((m + kBM - 1) / kBM) * ((n + kBN - 1) / kBN);
  if (tiles > INT32_MAX) return cudaErrorInvalidValue;
  kernel<<<static_cast<unsigned>(tiles), kThreads, kSmemBytes, stream>>>(
      static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), static_cast<uint16_t*>(out), m, k, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t mm_sm90(bool bf16, const void* a, const void* b, void* out, int64_t m, int64_t k, int64_t n, int device,
                    cudaStream_t stream) {
  return bf16 ? launch<true>(a, b, out, m, k, n, device, stream) : launch<false>(a, b, out, m, k, n, device, stream);
}

}  // namespace dbench::kernels
