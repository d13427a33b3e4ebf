// CUPTI activity records -> per-block GPU aggregates.
//
// Torch-free and CUPTI-call-free: this file only uses the record *struct
// definitions* of <cupti_activity.h>; no libcupti function is called, so the
// aggregation logic is unit-tested with hand-built records (test_records.cpp)
// on machines without a GPU. Iterating a CUPTI buffer
// (cuptiActivityGetNextRecord) is the collector's job (collector.cpp), which
// hands each record to Aggregator::consume.
//
// Attribution is by time window: the runner drains the GPU queue before and
// after every timed block, so the windows [begin, end] (CUPTI timestamps taken
// after the pre-block drain and after the post-block drain) do not overlap,
// and every GPU activity that *starts* inside a window belongs to that block
// -- whichever CPU thread launched it (autograd's backward runs its kernels on
// a worker thread, which external correlation ids pushed on the main thread
// would miss). External correlation (correlationId -> externalId) is kept as
// an optional cross-check: kernels whose external id equals the block id.
#pragma once

#include <cupti_activity.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace dbench::cupti {

// The record struct each enabled kind delivers with the CUDA 13 headers
// (CUPTI_API_VERSION 130001). Later record versions only append fields, so the
// fields read here (kind, start, end, correlationId, name, bytes) keep their
// offsets; records.cpp static_asserts them.
using KernelRecord = CUpti_ActivityKernel10;       // KIND_CONCURRENT_KERNEL and KIND_KERNEL
using MemcpyRecord = CUpti_ActivityMemcpy6;        // KIND_MEMCPY
using MemcpyPtoPRecord = CUpti_ActivityMemcpyPtoP4;  // KIND_MEMCPY2 (peer to peer)
using MemsetRecord = CUpti_ActivityMemset4;        // KIND_MEMSET
using ExternalCorrelationRecord = CUpti_ActivityExternalCorrelation;

struct Interval {
  uint64_t start;
  uint64_t end;
};

// Total length of the union of the intervals (overlaps counted once).
// Sorts `intervals` in place. Intervals with end < start count as empty.
uint64_t union_length(std::vector<Interval>& intervals);

// Itanium C++ demangling of a kernel name; the name itself if it is not mangled.
std::string demangle(const char* name);

// The kinds of GPU activity aggregated; they index the per-kind totals below.
enum ActivityKind : size_t { kKernel, kMemcpy, kMemset, kNumActivityKinds };

// Count, summed duration and bytes of the activities of one kind.
struct ActivityTotals {
  uint64_t count = 0;
  uint64_t ns = 0;     // sum of durations
  uint64_t bytes = 0;  // memcpy and memset; 0 for kernels
};
using PerKind = std::array<ActivityTotals, kNumActivityKinds>;  // indexed by ActivityKind

// What one timed block put on the GPU.
struct BlockStats {
  int64_t id = 0;
  uint64_t begin_ns = 0;  // window, CUPTI timestamps
  uint64_t end_ns = 0;
  PerKind activity;             // kernels, memcpys and memsets started in the window
  uint64_t kernel_busy_ns = 0;  // union of kernel intervals: overlapping kernels counted once
  uint64_t busy_ns = 0;  // union of kernels, memcpys and memsets: GPU-busy time of the block
  uint64_t span_ns = 0;  // first activity start .. last activity end (0 when none)
  // Kernels whose correlation id maps (EXTERNAL_CORRELATION records) to an
  // external id equal to the block id; only meaningful when the collector
  // pushes the block id as external correlation id (optional).
  uint64_t kernels_correlated = 0;
  std::map<std::string, uint64_t, std::less<>> kernel_names;  // raw (mangled) name -> launches
};

// GPU activity that fell in no window.
struct Counters {
  uint64_t records = 0;       // records consumed
  uint64_t ignored = 0;       // records of kinds not aggregated
  uint64_t no_timestamp = 0;  // start == end == 0: CUPTI could not time it
  PerKind unattributed;       // started outside every window
  uint64_t late = 0;  // records for a block whose stats were already taken (also unattributed)
};

class Aggregator {
 public:
  static constexpr uint64_t kOpen = std::numeric_limits<uint64_t>::max();

  // Windows must be opened in increasing time and must not overlap: at most
  // one block is open, ids are never reused. On misuse returns false and sets
  // *error (the state is unchanged).
  bool begin_block(int64_t id, uint64_t timestamp_ns, std::string* error);
  bool end_block(int64_t id, uint64_t timestamp_ns, std::string* error);

  // One CUPTI record: kernels, memcpys, memsets and external correlations are
  // aggregated; other kinds are counted as ignored.
  void consume(const CUpti_Activity& record);

  // The same, kind-independent (used by consume; handy for tests).
  void add_kernel(uint64_t start, uint64_t end, uint32_t correlation_id, const char* name);
  void add_memcpy(uint64_t start, uint64_t end, uint64_t bytes);
  void add_memset(uint64_t start, uint64_t end, uint64_t bytes);
  void add_external_correlation(uint32_t correlation_id, uint64_t external_id);

  // Stats of every closed block not taken yet (each block is returned once),
  // keyed by block id. Blocks that saw no activity are returned too (zeros).
  std::map<int64_t, BlockStats> take_closed();

  const Counters& counters() const { return counters_; }
  bool has_open_block() const { return !windows_.empty() && windows_.back().end == kOpen; }
  size_t pending_blocks() const { return accum_.size(); }

 private:
  struct Window {
    int64_t id;
    uint64_t begin;
    uint64_t end;  // kOpen while open
    bool taken;
  };
  struct Accum {
    BlockStats stats;
    std::vector<Interval> kernel_intervals;
    std::vector<Interval> all_intervals;
    std::vector<uint32_t> kernel_correlations;
    uint64_t first_start = kOpen;
    uint64_t last_end = 0;
  };
  // The block a GPU activity starting at `start` belongs to; nullptr if none
  // (counted as unattributed by the caller).
  Accum* find(uint64_t start);
  void add(ActivityKind kind, uint64_t start, uint64_t end, uint64_t bytes,
           uint32_t correlation_id, const char* name);
  // add() for a memcpy or memset record of struct type R.
  template <typename R>
  void add_transfer(ActivityKind kind, const CUpti_Activity& record);

  std::vector<Window> windows_;  // sorted by begin (begin_block enforces it)
  std::unordered_set<int64_t> used_ids_;
  std::unordered_map<int64_t, Accum> accum_;  // blocks not taken yet
  std::unordered_map<uint32_t, uint64_t> external_;  // correlationId -> externalId
  Counters counters_;
};

}  // namespace dbench::cupti
