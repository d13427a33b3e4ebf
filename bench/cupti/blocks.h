// One timed block at a time on the CUPTI collector, read back as per-call GPU
// figures: the GPU pass of the C++ driver (bench/cpp/timing.h,
// --dbench_gpu_timer=cupti). Torch-free; tested against the fake libcupti
// (test_blocks.cpp).
//
// Usage, around one timed loop of `calls` calls:
//
//   sync();                          // drain the device queue
//   ScopedBlock block(collector);    // the window opens here
//   ... the timed loop ...
//   sync();                          // drain again: every activity has started
//   PerCall per;
//   Status s = block.finish(calls, &per);  // closes, flushes, reads this block
//
// Block ids: the ScopedBlocks of a process number their windows 1, 2, ... (the
// collector refuses a reused id), so a process must not also open windows on
// the collector by other means.
#pragma once

#include <cstdint>

#include "collector.h"

namespace dbench::cupti {

// What one call put on the GPU, averaged over the block. The same definitions
// as the Python GPU rows (bench/core/gputimer.py, CuptiTimer.collect), so a C++ row
// and a Python row of one op read alike.
struct PerCall {
  // BlockStats::busy_ns / calls: the union of the block's kernel, memcpy and
  // memset intervals (overlaps counted once, idle gaps between them not at
  // all) -- not the sum of kernel durations, and not the first-to-last span.
  double gpu_us = 0;
  double kernels = 0;  // kernels started in the window / calls
};

// The per-call figures of a block of `calls` (> 0) calls.
PerCall per_call(const BlockStats& stats, uint64_t calls);

// available(), then enable(options): Ok when the collector traces from now on,
// else why this process cannot (no driver, libcupti missing, another CUPTI
// client such as Nsight Systems). Idempotent.
Status enable_collector(Collector& collector, const EnableOptions& options = {});

// The window of one block, opened at construction. finish() closes it and
// reads the block; a block left without finish() (an exception, a skipped
// benchmark) is closed by the destructor and its stats are discarded, so the
// next block can open.
class ScopedBlock {
 public:
  explicit ScopedBlock(Collector& collector);
  ~ScopedBlock();
  ScopedBlock(const ScopedBlock&) = delete;
  ScopedBlock& operator=(const ScopedBlock&) = delete;

  // Ok, or why the window could not be opened (then finish() fails too).
  const Status& opened() const { return opened_; }

  // Call right after the post-loop device sync. Closes the window, flushes
  // CUPTI's buffers and fills *out. An error, and *out untouched, when the
  // window was not open, calls is 0, the flush reported an error, the block's
  // stats are missing, or CUPTI dropped records while the block was open
  // (its figures would be too low): never a partial figure.
  Status finish(uint64_t calls, PerCall* out);

 private:
  Collector& collector_;
  int64_t id_;
  uint64_t dropped_at_open_ = 0;
  Status opened_;
  bool open_ = false;
};

}  // namespace dbench::cupti
