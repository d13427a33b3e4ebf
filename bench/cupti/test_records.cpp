// The aggregation of CUPTI records into per-block stats, on hand-built records
// of the struct versions the CUDA 13 headers deliver (no GPU, no libcupti).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "records.h"
#include "test_support.h"

namespace dbench::cupti {
namespace {

using namespace test_support;

template <typename R>
void feed(Aggregator& agg, const R& record) {
  agg.consume(reinterpret_cast<const CUpti_Activity&>(record));
}

void open_block(Aggregator& agg, int64_t id, uint64_t begin) {
  std::string error;
  ASSERT_TRUE(agg.begin_block(id, begin, &error)) << error;
}

void close_block(Aggregator& agg, int64_t id, uint64_t end) {
  std::string error;
  ASSERT_TRUE(agg.end_block(id, end, &error)) << error;
}

void window(Aggregator& agg, int64_t id, uint64_t begin, uint64_t end) {
  open_block(agg, id, begin);
  close_block(agg, id, end);
}

TEST(CuptiRecords, KernelsAreAttributedToTheWindowHoldingTheirStart) {
  Aggregator agg;
  window(agg, 1, 1000, 2000);
  window(agg, 2, 3000, 4000);
  feed(agg, kernel_record(1100, 1200, "_Z3fooPf", 7));
  feed(agg, kernel_record(1300, 1450, "_Z3fooPf", 8));
  feed(agg, kernel_record(3500, 3600, "bar"));
  // Starts in block 2's window, ends after it: still block 2's (start decides).
  feed(agg, kernel_record(3990, 4100, "bar"));
  auto blocks = agg.take_closed();
  ASSERT_EQ(blocks.size(), 2u);
  const BlockStats& b1 = blocks.at(1);
  EXPECT_EQ(b1.id, 1);
  EXPECT_EQ(b1.begin_ns, 1000u);
  EXPECT_EQ(b1.end_ns, 2000u);
  EXPECT_EQ(b1.activity[kKernel].count, 2u);
  EXPECT_EQ(b1.activity[kKernel].ns, 100u + 150u);
  EXPECT_EQ(b1.kernel_busy_ns, 250u);
  EXPECT_EQ(b1.busy_ns, 250u);
  EXPECT_EQ(b1.span_ns, 1450u - 1100u);
  ASSERT_EQ(b1.kernel_names.size(), 1u);
  EXPECT_EQ(b1.kernel_names.at("_Z3fooPf"), 2u);
  const BlockStats& b2 = blocks.at(2);
  EXPECT_EQ(b2.activity[kKernel].count, 2u);
  EXPECT_EQ(b2.activity[kKernel].ns, 100u + 110u);
  EXPECT_EQ(b2.kernel_names.at("bar"), 2u);
  EXPECT_EQ(agg.counters().unattributed[kKernel].count, 0u);
  EXPECT_EQ(agg.counters().records, 4u);
}

TEST(CuptiRecords, WindowBoundsAreInclusive) {
  Aggregator agg;
  window(agg, 5, 1000, 2000);
  feed(agg, kernel_record(1000, 1010, "k"));
  feed(agg, kernel_record(2000, 2010, "k"));
  feed(agg, kernel_record(999, 1010, "k"));
  feed(agg, kernel_record(2001, 2010, "k"));
  auto blocks = agg.take_closed();
  EXPECT_EQ(blocks.at(5).activity[kKernel].count, 2u);
  EXPECT_EQ(agg.counters().unattributed[kKernel].count, 2u);
}

TEST(CuptiRecords, OverlappingKernelsCountOnceInBusyTime) {
  Aggregator agg;
  window(agg, 1, 0 + 10, 10000);
  // Two streams: [100, 600) and [400, 900) overlap by 200; [1000, 1100) alone;
  // [1020, 1050) nested inside it.
  feed(agg, kernel_record(100, 600, "a"));
  feed(agg, kernel_record(400, 900, "b"));
  feed(agg, kernel_record(1000, 1100, "c"));
  feed(agg, kernel_record(1020, 1050, "d"));
  auto blocks = agg.take_closed();
  const BlockStats& b = blocks.at(1);
  EXPECT_EQ(b.activity[kKernel].count, 4u);
  EXPECT_EQ(b.activity[kKernel].ns, 500u + 500u + 100u + 30u);
  EXPECT_EQ(b.kernel_busy_ns, 800u + 100u);
  EXPECT_EQ(b.busy_ns, 900u);
  EXPECT_EQ(b.span_ns, 1000u);
  EXPECT_EQ(b.kernel_names.size(), 4u);
}

TEST(CuptiRecords, MemcpyAndMemsetAreCountedAndJoinTheBusyUnion) {
  Aggregator agg;
  window(agg, 3, 100, 5000);
  feed(agg, memset_record(200, 300, 4096));
  feed(agg, kernel_record(250, 400, "k"));  // overlaps the memset by 50
  feed(agg, memcpy_record(1000, 1400, 1 << 20));
  feed(agg, memcpy_record(1500, 1600, 8));
  auto blocks = agg.take_closed();
  const BlockStats& b = blocks.at(3);
  EXPECT_EQ(b.activity[kKernel].count, 1u);
  EXPECT_EQ(b.activity[kKernel].ns, 150u);
  EXPECT_EQ(b.kernel_busy_ns, 150u);
  EXPECT_EQ(b.activity[kMemset].count, 1u);
  EXPECT_EQ(b.activity[kMemset].ns, 100u);
  EXPECT_EQ(b.activity[kMemset].bytes, 4096u);
  EXPECT_EQ(b.activity[kMemcpy].count, 2u);
  EXPECT_EQ(b.activity[kMemcpy].ns, 500u);
  EXPECT_EQ(b.activity[kMemcpy].bytes, (1u << 20) + 8u);
  EXPECT_EQ(b.busy_ns, 200u + 400u + 100u);  // [200,400) + [1000,1400) + [1500,1600)
  EXPECT_EQ(b.span_ns, 1600u - 200u);
}

TEST(CuptiRecords, ActivityOutsideEveryWindowIsUnattributed) {
  Aggregator agg;
  feed(agg, kernel_record(50, 80, "warmup"));  // before any window
  window(agg, 1, 100, 200);
  feed(agg, kernel_record(150, 160, "k"));
  feed(agg, kernel_record(300, 340, "between"));  // between windows
  feed(agg, memcpy_record(310, 330, 16));
  feed(agg, memset_record(320, 321, 4));
  window(agg, 2, 400, 500);
  feed(agg, kernel_record(900, 1000, "after"));  // after the last window
  auto blocks = agg.take_closed();
  EXPECT_EQ(blocks.at(1).activity[kKernel].count, 1u);
  EXPECT_EQ(blocks.at(2).activity[kKernel].count, 0u);  // returned though it saw no activity
  EXPECT_EQ(blocks.at(2).busy_ns, 0u);
  EXPECT_EQ(blocks.at(2).span_ns, 0u);
  const Counters& c = agg.counters();
  EXPECT_EQ(c.unattributed[kKernel].count, 3u);
  EXPECT_EQ(c.unattributed[kKernel].ns, 30u + 40u + 100u);
  EXPECT_EQ(c.unattributed[kMemcpy].count, 1u);
  EXPECT_EQ(c.unattributed[kMemcpy].ns, 20u);
  EXPECT_EQ(c.unattributed[kMemset].count, 1u);
  EXPECT_EQ(c.unattributed[kMemset].ns, 1u);
  EXPECT_EQ(c.late, 0u);
}

TEST(CuptiRecords, UnknownKindsAreIgnored) {
  Aggregator agg;
  window(agg, 1, 100, 200);
  feed(agg, api_record(120, 130));
  feed(agg, api_record(120, 130, CUPTI_ACTIVITY_KIND_DRIVER));
  feed(agg, blank_record<CUpti_ActivityOverhead3>(CUPTI_ACTIVITY_KIND_OVERHEAD));
  auto blocks = agg.take_closed();
  const BlockStats& b = blocks.at(1);
  EXPECT_EQ(b.activity[kKernel].count, 0u);
  EXPECT_EQ(b.activity[kMemcpy].count, 0u);
  EXPECT_EQ(b.busy_ns, 0u);
  EXPECT_EQ(agg.counters().records, 3u);
  EXPECT_EQ(agg.counters().ignored, 3u);
  EXPECT_EQ(agg.counters().unattributed[kKernel].count, 0u);
}

TEST(CuptiRecords, LegacyKernelKindUsesTheSameRecord) {
  Aggregator agg;
  window(agg, 1, 100, 200);
  feed(agg, kernel_record(110, 150, "serial", 0, CUPTI_ACTIVITY_KIND_KERNEL));
  EXPECT_EQ(agg.take_closed().at(1).activity[kKernel].count, 1u);
}

TEST(CuptiRecords, RecordsWithoutTimestampsAreCountedApart) {
  Aggregator agg;
  window(agg, 1, 0, 200);
  feed(agg, kernel_record(0, 0, "untimed"));
  EXPECT_EQ(agg.take_closed().at(1).activity[kKernel].count, 0u);
  EXPECT_EQ(agg.counters().no_timestamp, 1u);
  EXPECT_EQ(agg.counters().unattributed[kKernel].count, 0u);
}

TEST(CuptiRecords, OpenBlockCollectsButIsReturnedOnlyOnceClosed) {
  Aggregator agg;
  open_block(agg, 9, 1000);
  EXPECT_TRUE(agg.has_open_block());
  feed(agg, kernel_record(1500, 1600, "k"));  // a buffer delivered before end_block
  EXPECT_TRUE(agg.take_closed().empty());
  feed(agg, kernel_record(1700, 1800, "k"));
  close_block(agg, 9, 2000);
  EXPECT_FALSE(agg.has_open_block());
  auto blocks = agg.take_closed();
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks.at(9).activity[kKernel].count, 2u);
  EXPECT_TRUE(agg.take_closed().empty());  // each block is returned once
  EXPECT_EQ(agg.pending_blocks(), 0u);
}

TEST(CuptiRecords, RecordsForATakenBlockAreLate) {
  Aggregator agg;
  window(agg, 1, 100, 200);
  feed(agg, kernel_record(110, 120, "k"));
  ASSERT_EQ(agg.take_closed().at(1).activity[kKernel].count, 1u);
  feed(agg, kernel_record(150, 160, "k"));
  EXPECT_EQ(agg.counters().late, 1u);
  EXPECT_EQ(agg.counters().unattributed[kKernel].count, 1u);
  EXPECT_TRUE(agg.take_closed().empty());
}

TEST(CuptiRecords, MisuseIsReportedNotApplied) {
  Aggregator agg;
  std::string error;
  EXPECT_FALSE(agg.end_block(1, 100, &error));
  EXPECT_NE(error.find("no such open block"), std::string::npos);
  open_block(agg, 1, 100);
  EXPECT_FALSE(agg.begin_block(2, 150, &error));  // overlapping windows
  EXPECT_NE(error.find("still open"), std::string::npos);
  EXPECT_FALSE(agg.end_block(2, 150, &error));  // not the open one
  EXPECT_FALSE(agg.end_block(1, 50, &error));   // before its begin
  close_block(agg, 1, 200);
  EXPECT_FALSE(agg.begin_block(1, 300, &error));  // id reused
  EXPECT_NE(error.find("already used"), std::string::npos);
  EXPECT_FALSE(agg.begin_block(3, 150, &error));  // starts before the previous end
  open_block(agg, 3, 300);
  close_block(agg, 3, 400);
  auto blocks = agg.take_closed();
  EXPECT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks.count(1), 1u);
  EXPECT_EQ(blocks.count(3), 1u);
}

TEST(CuptiRecords, ExternalCorrelationCrossCheck) {
  Aggregator agg;
  window(agg, 42, 100, 1000);
  feed(agg, external_correlation_record(/*correlation_id=*/7, /*external_id=*/42));
  // Launched from the thread that pushed 42: correlated. The second kernel
  // (e.g. autograd's backward thread) has no external id but is in the window.
  feed(agg, kernel_record(200, 300, "fwd", 7));
  feed(agg, kernel_record(400, 500, "bwd", 8));
  const BlockStats b = agg.take_closed().at(42);
  EXPECT_EQ(b.activity[kKernel].count, 2u);
  EXPECT_EQ(b.kernels_correlated, 1u);
}

TEST(CuptiRecords, UnionLength) {
  std::vector<Interval> none;
  EXPECT_EQ(union_length(none), 0u);
  std::vector<Interval> v = {{50, 60}, {0, 10}, {5, 20}, {20, 30}, {40, 40}, {70, 65}};
  EXPECT_EQ(union_length(v), 30u + 10u);  // [0,30) + [50,60); empty/inverted ignored
}

TEST(CuptiRecords, Demangle) {
  EXPECT_EQ(demangle("_Z3fooPf"), "foo(float*)");
  EXPECT_EQ(demangle("plain_c_kernel"), "plain_c_kernel");
  EXPECT_EQ(demangle(nullptr), "<unnamed>");
}

TEST(CuptiRecords, Cuda13RecordVersions) {
  // What CONCURRENT_KERNEL / MEMCPY / MEMSET deliver with these headers.
  static_assert(std::is_same_v<KernelRecord, CUpti_ActivityKernel10>);
  static_assert(std::is_same_v<MemcpyRecord, CUpti_ActivityMemcpy6>);
  static_assert(std::is_same_v<MemsetRecord, CUpti_ActivityMemset4>);
  EXPECT_EQ(alignof(CUpti_ActivityKernel10), 8u);
}

}  // namespace
}  // namespace dbench::cupti
