// blocks.cpp (the C++ driver's GPU pass) against the fake libcupti
// (fake_cupti.cpp) and fake libcuda.so.1: per-call figures with the Python GPU
// rows' definition, and every failure an error instead of a number. Its own
// process, so its block ids cannot meet test_collector's.
#include <cupti_activity.h>
#include <cupti_result.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "blocks.h"
#include "fake_loader.h"

namespace dbench::cupti {
namespace {

using test_support::Fake;
using test_support::fake;

// A clock that only moves forward across tests (windows must not go back in time).
uint64_t later() {
  static uint64_t t = 1'000'000;
  t += 1'000'000;
  return t;
}

class GpuBlocks : public ::testing::Test {
 protected:
  void SetUp() override {
    f.reset();
    // enable(), not enable_collector(): after a failed enable() (EnableFailureSaysWhy),
    // available() keeps reporting that failure, as it should for the driver's one attempt.
    Status s = c.enable();
    ASSERT_TRUE(s.ok) << s.reason;
    std::string error;
    c.flush(&error);  // what earlier tests left
    c.dropped();
  }

  Fake& f = fake();
  Collector& c = Collector::instance();
};

TEST(PerCall, BusyTimeAndKernelsPerCall) {
  BlockStats s;
  s.busy_ns = 6000;
  s.activity[kKernel].count = 8;
  s.activity[kKernel].ns = 9000;  // summed durations: not what gpu_us is
  s.span_ns = 7000;               // first start .. last end: not either
  const PerCall p = per_call(s, 4);
  EXPECT_DOUBLE_EQ(p.gpu_us, 1.5);
  EXPECT_DOUBLE_EQ(p.kernels, 2.0);
}

TEST_F(GpuBlocks, UnionOfTheBlocksActivityPerCall) {
  const uint64_t t0 = later();
  f.set_time(t0);
  ScopedBlock block(c);
  ASSERT_TRUE(block.opened().ok) << block.opened().reason;
  f.add_kernel(t0 + 100, t0 + 300, "k1", 0);
  f.add_kernel(t0 + 200, t0 + 500, "k2", 0);  // overlaps k1: counted once
  f.add_memcpy(t0 + 900, t0 + 1000, 64);
  f.add_kernel(t0 - 50, t0 - 10, "before", 0);  // started before the window: not this block's
  f.set_time(t0 + 2000);
  PerCall p;
  Status s = block.finish(2, &p);
  ASSERT_TRUE(s.ok) << s.reason;
  EXPECT_DOUBLE_EQ(p.gpu_us, (400 + 100) / 2.0 / 1e3);
  EXPECT_DOUBLE_EQ(p.kernels, 1.0);
  EXPECT_FALSE(block.finish(2, &p).ok);  // once
}

TEST_F(GpuBlocks, DroppedRecordsGiveAnErrorNotAFigure) {
  const uint64_t t0 = later();
  f.set_time(t0);
  ScopedBlock block(c);
  f.add_kernel(t0 + 1, t0 + 2, "k", 0);
  f.set_dropped(3);
  f.set_time(t0 + 10);
  PerCall p;
  p.gpu_us = -1;
  Status s = block.finish(1, &p);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("dropped 3"), std::string::npos) << s.reason;
  EXPECT_EQ(p.gpu_us, -1);  // untouched
}

TEST_F(GpuBlocks, ZeroCallsIsAnError) {
  f.set_time(later());
  ScopedBlock block(c);
  PerCall p;
  EXPECT_FALSE(block.finish(0, &p).ok);
}

TEST_F(GpuBlocks, AnUnfinishedBlockIsClosedSoTheNextOneOpens) {
  f.set_time(later());
  { ScopedBlock abandoned(c); }
  f.set_time(later());
  ScopedBlock next(c);
  EXPECT_TRUE(next.opened().ok) << next.opened().reason;
}

TEST_F(GpuBlocks, NotEnabledIsAnError) {
  ASSERT_TRUE(c.finalize().ok);
  ScopedBlock block(c);
  EXPECT_FALSE(block.opened().ok);
  PerCall p;
  Status s = block.finish(1, &p);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("not enabled"), std::string::npos) << s.reason;
}

TEST_F(GpuBlocks, EnableCollectorEnablesOnce) {
  ASSERT_TRUE(c.finalize().ok);
  Status s = enable_collector(c);
  ASSERT_TRUE(s.ok) << s.reason;
  EXPECT_TRUE(c.enabled());
  EXPECT_TRUE(enable_collector(c).ok);  // idempotent
}

// Last: after a failed enable(), available() reports that failure for the rest of the process.
TEST_F(GpuBlocks, EnableFailureSaysWhy) {
  ASSERT_TRUE(c.finalize().ok);
  f.reset();
  f.fail_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  Status s = enable_collector(c);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"), std::string::npos) << s.reason;
  EXPECT_FALSE(c.enabled());
  f.reset();  // the other client went away
}

}  // namespace
}  // namespace dbench::cupti
