// collector.cpp against a fake libcupti (fake_cupti.cpp) and a fake
// libcuda.so.1 (fake_cuda.cpp): loading through DBENCH_CUPTI_LIBRARY, the
// buffer callbacks (also from another thread), flush, windows, dropped
// records, finalize and error reporting -- without a GPU.
//
// The collector is a process-wide singleton (CUPTI's callbacks are plain
// functions), so every test starts from whatever state the previous one left
// and brings it to the state it needs.
#include <cupti_version.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "collector.h"
#include "fake_loader.h"

namespace dbench::cupti {
namespace {

using test_support::Fake;
using test_support::fake;

// Block ids never repeat within a process.
int64_t next_id() {
  static int64_t id = 0;
  return ++id;
}

// A clock that only moves forward across tests.
uint64_t later(uint64_t dt = 0) {
  static uint64_t t = 1'000'000;
  t += 1'000'000 + dt;
  return t;
}

// Every test: the fake libcupti loaded, and the process-wide collector.
class CuptiCollector : public ::testing::Test {
 protected:
  // A block opened with a fresh id at a fresh time t0.
  struct OpenedBlock {
    int64_t id;
    uint64_t t0;
  };

  // Enables the collector on a reset fake, with nothing left from earlier tests.
  void enable(const EnableOptions& o = {}) {
    f.reset();
    Status s = c.enable(o);
    EXPECT_TRUE(s.ok) << s.reason;
    std::string error;
    c.flush(&error);  // drop what earlier tests left
    c.dropped();
  }

  // Set the fake clock to t, then open / close block `id`: its window starts / ends at t.
  Status begin_at(int64_t id, uint64_t t) {
    f.set_time(t);
    return c.begin_block(id);
  }
  Status end_at(int64_t id, uint64_t t) {
    f.set_time(t);
    return c.end_block(id);
  }

  OpenedBlock begin_fresh_block() {
    const OpenedBlock b{next_id(), later()};
    EXPECT_TRUE(begin_at(b.id, b.t0).ok);
    return b;
  }

  // c.flush(), expecting no CUPTI error.
  std::map<int64_t, BlockStats> flush() {
    std::string error;
    auto blocks = c.flush(&error);
    EXPECT_TRUE(error.empty()) << error;
    return blocks;
  }

  Fake& f = fake();
  Collector& c = Collector::instance();
};

TEST_F(CuptiCollector, LoadsTheLibraryNamedByTheEnvironment) {
  Info i = c.info();
  EXPECT_EQ(i.header_version, static_cast<uint32_t>(CUPTI_API_VERSION));
  EXPECT_EQ(i.runtime_version, static_cast<uint32_t>(CUPTI_API_VERSION));
  EXPECT_NE(i.library.find("fake_cupti"), std::string::npos) << i.library;
}

TEST_F(CuptiCollector, EnableFailureIsReportedAndNothingStaysEnabled) {
  ASSERT_TRUE(c.finalize().ok);
  f.reset();
  f.fail_enable(CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  Status s = c.enable();
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("cuptiActivityEnable(MEMSET)"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"), std::string::npos)
      << s.reason;
  EXPECT_FALSE(c.enabled());
  EXPECT_FALSE(f.enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));  // rolled back
  EXPECT_FALSE(f.enabled(CUPTI_ACTIVITY_KIND_MEMCPY));
  Status a = c.available();
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.reason, s.reason);
  EXPECT_FALSE(c.begin_block(next_id()).ok);

  f.reset();  // the other client went away
  s = c.enable();
  EXPECT_TRUE(s.ok) << s.reason;
  EXPECT_TRUE(c.available().ok);
  EXPECT_TRUE(f.enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  EXPECT_TRUE(f.enabled(CUPTI_ACTIVITY_KIND_MEMCPY));
  EXPECT_TRUE(f.enabled(CUPTI_ACTIVITY_KIND_MEMSET));
  EXPECT_FALSE(f.enabled(CUPTI_ACTIVITY_KIND_RUNTIME));
}

TEST_F(CuptiCollector, FlushAttributesRecordsToWindows) {
  enable();
  const Counters before = c.counters();
  const auto [id1, t0] = begin_fresh_block();
  f.add_kernel(t0 + 10, t0 + 110, "_Z4mul2Pf", 1);
  f.add_kernel(t0 + 200, t0 + 300, "_Z4mul2Pf", 2);
  f.add_memcpy(t0 + 400, t0 + 450, 64);
  f.add_api(t0 + 5, t0 + 6);  // not aggregated
  ASSERT_TRUE(end_at(id1, t0 + 1000).ok);
  f.add_kernel(t0 + 1500, t0 + 1600, "between", 3);  // in no window
  const int64_t id2 = next_id();
  ASSERT_TRUE(begin_at(id2, t0 + 2000).ok);
  ASSERT_TRUE(end_at(id2, t0 + 3000).ok);

  auto blocks = flush();
  ASSERT_EQ(blocks.size(), 2u);
  const BlockStats& b = blocks.at(id1);
  EXPECT_EQ(b.begin_ns, t0);
  EXPECT_EQ(b.end_ns, t0 + 1000);
  EXPECT_EQ(b.activity[kKernel].count, 2u);
  EXPECT_EQ(b.activity[kKernel].ns, 200u);
  EXPECT_EQ(b.busy_ns, 250u);
  EXPECT_EQ(b.activity[kMemcpy].count, 1u);
  EXPECT_EQ(b.activity[kMemcpy].bytes, 64u);
  EXPECT_EQ(b.kernel_names.at("_Z4mul2Pf"), 2u);
  EXPECT_EQ(blocks.at(id2).activity[kKernel].count, 0u);
  const Counters after = c.counters();
  EXPECT_EQ(after.unattributed[kKernel].count - before.unattributed[kKernel].count, 1u);
  EXPECT_EQ(after.ignored - before.ignored, 1u);
  EXPECT_EQ(after.records - before.records, 5u);
  EXPECT_TRUE(flush().empty());  // returned once
}

TEST_F(CuptiCollector, BuffersCompletedOnAnotherThreadWhileTheBlockIsOpen) {
  enable();
  const auto [id, t0] = begin_fresh_block();
  f.add_kernel(t0 + 10, t0 + 20, "early", 0);
  f.deliver_async();  // CUPTI's worker thread hands a buffer over mid-block
  f.add_kernel(t0 + 30, t0 + 50, "late", 0);
  ASSERT_TRUE(end_at(id, t0 + 100).ok);
  auto blocks = flush();
  ASSERT_EQ(blocks.count(id), 1u);
  EXPECT_EQ(blocks.at(id).activity[kKernel].count, 2u);
  EXPECT_EQ(blocks.at(id).activity[kKernel].ns, 30u);
}

TEST_F(CuptiCollector, MisuseIsAnErrorNotACrash) {
  enable();
  const int64_t id = begin_fresh_block().id;
  Status s = c.begin_block(next_id());
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("still open"), std::string::npos) << s.reason;
  EXPECT_FALSE(c.end_block(id + 1000).ok);
  ASSERT_TRUE(c.end_block(id).ok);
  EXPECT_FALSE(c.begin_block(id).ok);  // id reused
}

TEST_F(CuptiCollector, DroppedRecordsAreCounted) {
  enable();
  const uint64_t base = c.dropped();
  f.set_dropped(5);
  EXPECT_EQ(c.dropped(), base + 5);
  EXPECT_EQ(c.dropped(), base + 5);  // CUPTI resets its count; the collector keeps the sum
}

TEST_F(CuptiCollector, ExternalCorrelationPushesTheBlockId) {
  ASSERT_TRUE(c.finalize().ok);
  EnableOptions o;
  o.external_correlation = true;
  enable(o);
  EXPECT_TRUE(f.enabled(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
  EXPECT_TRUE(f.enabled(CUPTI_ACTIVITY_KIND_RUNTIME));
  const int64_t id = begin_fresh_block().id;
  EXPECT_EQ(f.external_depth(), 1u);
  ASSERT_TRUE(c.end_block(id).ok);
  EXPECT_EQ(f.external_depth(), 0u);
  ASSERT_TRUE(c.finalize().ok);
  ASSERT_TRUE(c.enable().ok);  // back to the default kinds
  EXPECT_FALSE(f.enabled(CUPTI_ACTIVITY_KIND_RUNTIME));
}

TEST_F(CuptiCollector, FinalizeFlushesDetachesAndKeepsTheBlocks) {
  enable();
  const auto [id, t0] = begin_fresh_block();
  f.add_kernel(t0 + 1, t0 + 2, "k", 0);
  ASSERT_TRUE(end_at(id, t0 + 10).ok);
  ASSERT_TRUE(c.finalize().ok);
  EXPECT_TRUE(f.finalized());
  EXPECT_FALSE(c.enabled());
  EXPECT_FALSE(f.enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  EXPECT_TRUE(c.finalize().ok);  // idempotent
  auto blocks = flush();  // no CUPTI call any more, the data stays
  ASSERT_EQ(blocks.count(id), 1u);
  EXPECT_EQ(blocks.at(id).activity[kKernel].count, 1u);
  EXPECT_FALSE(c.begin_block(next_id()).ok);
  ASSERT_TRUE(c.enable().ok);  // CUPTI can be attached again
  EXPECT_FALSE(f.finalized());
}

TEST_F(CuptiCollector, FinalizeWithoutDetach) {
  enable();
  ASSERT_TRUE(c.finalize(/*detach=*/false).ok);
  EXPECT_FALSE(f.finalized());
  EXPECT_FALSE(f.enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  ASSERT_TRUE(c.enable().ok);
}

}  // namespace
}  // namespace dbench::cupti
