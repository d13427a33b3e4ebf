// The torch-free CPU kernels against straightforward double-precision formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

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
