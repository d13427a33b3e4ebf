// The torch-free CPU kernels against straightforward double-precision formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "../../ops/kernels/half_convert.h"
#include "../../ops/kernels/kernels.h"

namespace k = dbench::kernels;

namespace {
std::vector<double> random_vector(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist;
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}
}  // namespace

TEST(CpuKernels, NoopCopiesEveryElement) {
  const auto x = random_vector(37, 1);
  std::vector<double> out(x.size(), std::nan(""));
  k::noop_cpu(k::DType::kFloat64, x.data(), out.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(out, x);
}

TEST(CpuKernels, MulAddFloat32) {
  const auto a = random_vector(101, 2), b = random_vector(101, 3), c = random_vector(101, 4);
  std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), cf(c.begin(), c.end());
  std::vector<float> out(a.size(), NAN);
  k::muladd_cpu(k::DType::kFloat32, af.data(), bf.data(), cf.data(), out.data(), 101);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(out[i], a[i] * b[i] + c[i], 1e-5);
}

TEST(CpuKernels, L2NormRowsHaveUnitNorm) {
  const int64_t rows = 5, cols = 19;
  const auto x = random_vector(rows * cols, 5);
  std::vector<double> y(x.size(), NAN);
  k::l2norm_fwd_cpu(k::DType::kFloat64, x.data(), y.data(), rows, cols, 1e-12);
  for (int64_t r = 0; r < rows; ++r) {
    double norm = 0;
    for (int64_t j = 0; j < cols; ++j) norm += y[r * cols + j] * y[r * cols + j];
    EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-12);
  }
}

TEST(CpuKernels, L2NormBackwardMatchesFiniteDifferences) {
  const int64_t rows = 3, cols = 7;
  const double eps = 1e-6, h = 1e-6;
  const auto x = random_vector(rows * cols, 6), g = random_vector(rows * cols, 7);
  std::vector<double> gx(x.size(), NAN);
  k::l2norm_bwd_cpu(k::DType::kFloat64, g.data(), x.data(), gx.data(), rows, cols, eps);
  auto loss = [&](const std::vector<double>& in) {
    std::vector<double> y(in.size());
    k::l2norm_fwd_cpu(k::DType::kFloat64, in.data(), y.data(), rows, cols, eps);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * g[i];
    return s;
  };
  for (size_t i = 0; i < x.size(); ++i) {
    auto xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    EXPECT_NEAR(gx[i], (loss(xp) - loss(xm)) / (2 * h), 1e-6) << "element " << i;
  }
}

TEST(CpuKernels, ZeroSizeIsANoOp) {
  k::muladd_cpu(k::DType::kFloat32, nullptr, nullptr, nullptr, nullptr, 0);
  k::l2norm_fwd_cpu(k::DType::kFloat64, nullptr, nullptr, 0, 4, 1e-6);
  SUCCEED();
}

TEST(IndexWidth, Int32PredicateAtTheBoundary) {
  EXPECT_TRUE(k::fits_int32(INT32_MAX));
  EXPECT_FALSE(k::fits_int32(int64_t{INT32_MAX} + 1));
}

TEST(CudaStub, ReportsMissingKernelsInCpuBuilds) {
  if (k::cuda_kernels_available()) GTEST_SKIP() << "CUDA build: the stub is not linked";
  EXPECT_NE(k::muladd_cuda(k::DType::kFloat32, nullptr, nullptr, nullptr, nullptr, 0, nullptr), 0);
}

// ---- elementwise path selection -------------------------------------------------

TEST(VectorPath, AlignedPointersTakeTheVectorPath) {
  alignas(16) static float buf[64];
  const void* ptrs[] = {buf, buf + 16, buf + 32};
  EXPECT_TRUE(k::vector_path_ok(ptrs, 3, 16, k::DType::kFloat32));
  EXPECT_TRUE(k::vector_path_ok(ptrs, 3, 17, k::DType::kFloat32));  // the tail rides along
  EXPECT_EQ(k::vector_width(k::DType::kFloat32), 4);
  EXPECT_EQ(k::vector_width(k::DType::kFloat64), 2);
}

TEST(VectorPath, AnyMisalignedPointerTakesTheScalarPath) {
  alignas(16) static double buf[64];
  const void* ptrs[] = {buf, buf + 1, buf + 32};  // a storage offset of one double
  EXPECT_FALSE(k::vector_path_ok(ptrs, 3, 32, k::DType::kFloat64));
  const void* odd_out[] = {buf, reinterpret_cast<const char*>(buf) + 4};
  EXPECT_FALSE(k::vector_path_ok(odd_out, 2, 32, k::DType::kFloat32));
}

TEST(VectorPath, FewerElementsThanOneVectorTakeTheScalarPath) {
  alignas(16) static float buf[4];
  const void* ptrs[] = {buf};
  EXPECT_FALSE(k::vector_path_ok(ptrs, 1, 3, k::DType::kFloat32));
  EXPECT_FALSE(k::vector_path_ok(ptrs, 1, 0, k::DType::kFloat32));
}

TEST(VectorPath, RowsNeedAlignedRowStarts) {
  alignas(16) static float buf[64];
  const void* ptrs[] = {buf, buf + 32};
  EXPECT_TRUE(k::rows_vector_path_ok(ptrs, 2, 8, k::DType::kFloat32));
  EXPECT_FALSE(k::rows_vector_path_ok(ptrs, 2, 6, k::DType::kFloat32));  // row 1 starts 8 bytes in
}

TEST(VectorPath, SixteenBitTypesMoveEightElementsPerAccess) {
  EXPECT_EQ(k::vector_width(k::DType::kFloat16), 8);
  EXPECT_EQ(k::vector_width(k::DType::kBFloat16), 8);
  alignas(16) static uint16_t buf[32];
  const void* aligned[] = {buf, buf + 8};
  const void* offset[] = {buf, buf + 4};  // 8 bytes in
  EXPECT_TRUE(k::rows_vector_path_ok(aligned, 2, 8, k::DType::kBFloat16));
  EXPECT_FALSE(k::rows_vector_path_ok(aligned, 2, 4, k::DType::kBFloat16));
  EXPECT_FALSE(k::vector_path_ok(offset, 2, 16, k::DType::kFloat16));
}

// ---- l2norm's row schedules --------------------------------------------------------

TEST(RowPath, WarpAccessesPerLaneArePowersOfTwoUpToTheLimit) {
  EXPECT_EQ(k::warp_row_packs(0, 4), 1);
  EXPECT_EQ(k::warp_row_packs(32, 1), 1);
  EXPECT_EQ(k::warp_row_packs(33, 1), 2);
  EXPECT_EQ(k::warp_row_packs(384, 4), 4);    // 96 packs: 3 per lane, rounded up to 4
  EXPECT_EQ(k::warp_row_packs(1024, 4), 8);   // the roofline's float32 rows: 8 x 16 bytes per lane
  EXPECT_EQ(k::warp_row_packs(1028, 4), 0);   // one pack too many
  EXPECT_EQ(k::warp_row_packs(2048, 8), 8);   // float16 / bfloat16
  EXPECT_EQ(k::warp_row_packs(257, 1), 0);
}

TEST(RowPath, AutoTakesTheWarpScheduleWhereTheRowFits) {
  alignas(16) static float buf[2048 + 4];
  const void* aligned[] = {buf, buf + 1024};
  const void* misaligned[] = {buf + 1, buf + 1024};
  const auto f32 = k::DType::kFloat32;
  EXPECT_EQ(k::resolve_row_path(k::RowPath::kAuto, aligned, 2, 1024, f32), k::RowPath::kWarp);
  EXPECT_EQ(k::resolve_row_path(k::RowPath::kAuto, misaligned, 2, 1024, f32), k::RowPath::kBlock);  // 1024 accesses
  EXPECT_EQ(k::resolve_row_path(k::RowPath::kAuto, misaligned, 2, 256, f32), k::RowPath::kWarp);
  EXPECT_EQ(k::resolve_row_path(k::RowPath::kBlock, aligned, 2, 1024, f32), k::RowPath::kBlock);
  EXPECT_EQ(k::resolve_row_path(k::RowPath::kWarp, aligned, 2, 1024, f32), k::RowPath::kWarp);
  EXPECT_EQ(k::resolve_row_path(k::RowPath::kWarp, aligned, 2, 2048, f32), k::RowPath::kAuto);  // refused
}

TEST(IndexWidth, RowwiseReachCoversTheRowCountersLastStep) {
  EXPECT_GE(k::rowwise_reach(1, 1), int64_t{1} + int64_t{k::kMaxBlocks} * k::kWarpsPerBlock);
}

// ---- 16-bit CPU kernels ------------------------------------------------------------

TEST(CpuKernels, MulAddFloat16RoundsOnceFromFloat) {
  namespace hc = dbench::kernels::halfconv;
  const auto a = random_vector(257, 21), b = random_vector(257, 22), c = random_vector(257, 23);
  std::vector<uint16_t> ah, bh, ch, out(a.size(), 0);
  for (size_t i = 0; i < a.size(); ++i) {
    ah.push_back(hc::float_to_fp16(static_cast<float>(a[i])));
    bh.push_back(hc::float_to_fp16(static_cast<float>(b[i])));
    ch.push_back(hc::float_to_fp16(static_cast<float>(c[i])));
  }
  k::muladd_cpu(k::DType::kFloat16, ah.data(), bh.data(), ch.data(), out.data(), static_cast<int64_t>(a.size()));
  for (size_t i = 0; i < a.size(); ++i) {
    const float want = std::fma(hc::fp16_to_float(ah[i]), hc::fp16_to_float(bh[i]), hc::fp16_to_float(ch[i]));
    EXPECT_EQ(out[i], hc::float_to_fp16(want)) << "element " << i;
  }
}

TEST(CpuKernels, L2NormBFloat16RowsHaveUnitNorm) {
  namespace hc = dbench::kernels::halfconv;
  const int64_t rows = 4, cols = 33;
  const auto x = random_vector(rows * cols, 24);
  std::vector<uint16_t> xh, y(x.size(), 0);
  for (double v : x) xh.push_back(hc::float_to_bf16(static_cast<float>(v)));
  for (const auto w : {k::IndexWidth::kInt32, k::IndexWidth::kInt64}) {
    k::l2norm_fwd_cpu(k::DType::kBFloat16, xh.data(), y.data(), rows, cols, 1e-6, w);
    for (int64_t r = 0; r < rows; ++r) {
      double norm = 0;
      for (int64_t j = 0; j < cols; ++j) norm += std::pow(hc::bf16_to_float(y[r * cols + j]), 2);
      EXPECT_NEAR(std::sqrt(norm), 1.0, 4e-3);  // each entry within half a bfloat16 ulp (2^-9 relative)
    }
  }
}

TEST(VectorPath, MmChunksNeedAlignedRows) {
  alignas(16) static uint16_t buf[256];
  EXPECT_TRUE(k::mm_chunked_path_ok(buf, buf + 64, buf + 128, 16, 8, k::DType::kBFloat16));
  EXPECT_FALSE(k::mm_chunked_path_ok(buf, buf + 64, buf + 128, 17, 8, k::DType::kBFloat16));
  EXPECT_FALSE(k::mm_chunked_path_ok(buf, buf + 64, buf + 128, 16, 12, k::DType::kFloat16));
  EXPECT_FALSE(k::mm_chunked_path_ok(buf + 1, buf + 64, buf + 128, 16, 8, k::DType::kFloat16));
}

// ---- 16-bit conversions ------------------------------------------------------------

namespace hc = dbench::kernels::halfconv;

TEST(HalfConvert, EveryFloat16RoundTrips) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = hc::fp16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(hc::fp16_to_float(hc::float_to_fp16(f)))) << h;
      continue;
    }
    EXPECT_EQ(hc::float_to_fp16(f), h) << h;
  }
}

TEST(HalfConvert, Float16KnownValuesAndTies) {
  EXPECT_EQ(hc::fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(hc::fp16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(hc::fp16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(hc::float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even: down
  EXPECT_EQ(hc::float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie to even: up
  EXPECT_EQ(hc::float_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(hc::float_to_fp16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(hc::float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: zero
  EXPECT_EQ(hc::float_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(hc::float_to_fp16(-std::ldexp(3.0f, -25)), 0x8002);  // 1.5 units: tie to even, 2
}

#ifdef __FLT16_MAX__
TEST(HalfConvert, Float16MatchesTheCompiler) {
  std::mt19937 gen(11);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(gen);
    if (i % 2) u = (u & 0x83ffffffu) | 0x38000000u;  // half of them near half's range
    float f;
    std::memcpy(&f, &u, sizeof f);
    if (std::isnan(f)) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, sizeof ref_bits);
    ASSERT_EQ(hc::float_to_fp16(f), ref_bits) << f;
  }
}
#endif

TEST(HalfConvert, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(hc::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(hc::bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(hc::float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie: down to even
  EXPECT_EQ(hc::float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie: up to even
  EXPECT_EQ(hc::float_to_bf16(1.0f + std::ldexp(1.0f, -7) + std::ldexp(1.0f, -12)), 0x3f81);
  EXPECT_TRUE(std::isnan(hc::bf16_to_float(hc::float_to_bf16(std::nanf("")))));
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = hc::bf16_to_float(static_cast<uint16_t>(h));
    if (!std::isnan(f)) EXPECT_EQ(hc::float_to_bf16(f), h) << h;
  }
}

// ---- mm ---------------------------------------------------------------------------

namespace {
std::vector<double> ref_mm(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t kk,
                           int64_t n) {
  std::vector<double> out(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < kk; ++p)
      for (int64_t j = 0; j < n; ++j) out[i * n + j] += a[i * kk + p] * b[p * n + j];
  return out;
}
}  // namespace

TEST(CpuKernels, MmFloat64OddSizes) {
  for (auto [m, kk, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {17, 33, 65}, {130, 70, 257}, {3, 600, 5}}) {
    const auto a = random_vector(m * kk, 8), b = random_vector(kk * n, 9);
    std::vector<double> out(static_cast<size_t>(m * n), NAN);
    k::mm_cpu(k::DType::kFloat64, a.data(), b.data(), out.data(), m, kk, n);
    const auto want = ref_mm(a, b, m, kk, n);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << i;
  }
}

TEST(CpuKernels, MmZeroInnerDimensionWritesZeros) {
  std::vector<float> out(6, NAN);
  k::mm_cpu(k::DType::kFloat32, nullptr, nullptr, out.data(), 2, 0, 3);
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(CpuKernels, MmBFloat16AccumulatesInFloat) {
  const int64_t m = 9, kk = 40, n = 11;
  auto a = random_vector(m * kk, 10), b = random_vector(kk * n, 11);
  std::vector<uint16_t> ab(a.size()), bb(b.size()), out(static_cast<size_t>(m * n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = hc::bf16_to_float(ab[i] = hc::float_to_bf16(static_cast<float>(a[i])));
  for (size_t i = 0; i < b.size(); ++i) b[i] = hc::bf16_to_float(bb[i] = hc::float_to_bf16(static_cast<float>(b[i])));
  k::mm_cpu(k::DType::kBFloat16, ab.data(), bb.data(), out.data(), m, kk, n);
  const auto want = ref_mm(a, b, m, kk, n);  // of the rounded inputs
  double err = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double d = hc::bf16_to_float(out[i]) - want[i];
    err += d * d;
    norm += want[i] * want[i];
  }
  EXPECT_LT(std::sqrt(err / norm), 4e-3);  // one bf16 rounding of the output: 2^-9 at most
}
