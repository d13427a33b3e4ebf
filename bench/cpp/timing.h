// How every benchmark's calls are timed: the device sync around a loop, the timed loop itself, the
// GPU pass's CUPTI block around it, and the calibration of the rounds schedule's blocks.
// Header-only (templates over the call); c10 and Google Benchmark headers, no ATen.
#pragma once

#include <benchmark/benchmark.h>
#include <c10/core/Device.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>

#ifdef DBENCH_DRIVER_CUPTI
#include "blocks.h"  // bench/cupti: the CUPTI collector's per-block figures
#endif

namespace dbench::driver {

// ---------------------------------------------------------------------------
// CUDA synchronisation, without CUDA headers: the CUDA DeviceGuardImpl is
// registered by libc10_cuda when torch has CUDA.
//
// "CPU cost per call" follows bench/core/runner.py::time_block: the device queue is
// drained before and after the timed loop, both outside the timed region, and
// never inside it. A call is therefore timed from the host's point of view
// (launch cost, not kernel time). Google Benchmark times one loop of
// state.max_iterations calls per repetition (~min_time long), so on a GPU
// whose per-kernel time exceeded the host cost per call the launch queue
// would fill and the wall time would become the GPU throughput; for these
// tiny kernels the host cost dominates (same caveat as the Python runner's
// 5 ms blocks).
struct Sync {
  c10::Device device{c10::kCPU};
  void operator()() const {
    if (device.is_cuda()) {
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->synchronizeDevice(device.index());
    }
  }
};

// How every benchmark's loop is run: the device sync, and whether this is the
// GPU pass (CUPTI enabled: each loop is a CUPTI block).
struct Timing {
  Sync sync;
  bool gpu = false;
};

// The timed loop: one op call per iteration, its output freed inside the
// iteration (as in Python, where the result is dropped right away).
template <class F>
void run_loop(benchmark::State& state, F& call) {
  for (auto _ : state) {
    auto out = call();
    benchmark::DoNotOptimize(out);
  }
}

#ifdef DBENCH_DRIVER_CUPTI
// The GPU pass's loop: the same loop inside one CUPTI block window. The block's
// end, flush and read-back run after the loop, outside the timed region.
template <class F>
void time_gpu_block(benchmark::State& state, const Sync& sync, F& call) {
  sync();  // untimed: the window opens on an empty device queue
  dbench::cupti::ScopedBlock block(dbench::cupti::Collector::instance());
  if (!block.opened().ok) {
    state.SkipWithError(("CUPTI: " + block.opened().reason).c_str());
    return;
  }
  run_loop(state, call);
  sync();  // every activity of the loop has started (and ended) inside the window
  dbench::cupti::PerCall per;
  const dbench::cupti::Status s = block.finish(static_cast<uint64_t>(state.iterations()), &per);
  if (!s.ok) {
    state.SkipWithError(("CUPTI: " + s.reason).c_str());
    return;
  }
  state.counters["gpu_us"] = per.gpu_us;  // plain values: already per call
  state.counters["kernels_per_call"] = per.kernels;
}
#endif

template <class F>
void time_calls(benchmark::State& state, const std::string& error, const Timing& timing, F& call) {
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
#ifdef DBENCH_DRIVER_CUPTI
  if (timing.gpu) {
    time_gpu_block(state, timing.sync, call);
    return;
  }
#endif
  timing.sync();  // untimed: the loop starts with an empty device queue
  run_loop(state, call);
  timing.sync();  // untimed: the timer stopped when the loop ended
}

// The calls of one block of `seconds` (the rounds schedule, schedule.h), found as bench/core/runner.py
// calibrate finds them (the drain of the device queue after the calls counted); these calls are
// also the case's warm-up.
template <class F>
int64_t calibrate_calls(const Timing& timing, F& call, double seconds) {
  int64_t n = 1;
  for (;;) {
    timing.sync();
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n; ++i) {
      auto out = call();
      benchmark::DoNotOptimize(out);
    }
    timing.sync();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed >= seconds) return n;
    const double grown = elapsed > 0 ? std::ceil(static_cast<double>(n) * seconds * 1.1 / elapsed) : 10.0 * n;
    n = std::max(n + 1, std::min(n * 10, static_cast<int64_t>(grown)));
  }
}

}  // namespace dbench::driver
