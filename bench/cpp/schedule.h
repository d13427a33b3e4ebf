// The rounds schedule (--dbench_rounds=R, the CPU run of the grouped order: bench/core/runner.py
// round_order). Google Benchmark's random interleaving shuffles every repetition of every benchmark,
// so a case's k-th repetition and its floor's lie at unrelated times, and on a host whose CPU
// drifts between speed states their ratio scatters with the drift. Here each benchmark's block
// length is fixed first (calibrate_calls, timing.h: the calls that fill --dbench_block_time), then
// the benchmarks are registered R times, round after round: in each round the benchmarks of one
// group (an op's kinds in one mode, its `direct` floor among them) lie together, the groups and the
// members of each in a random order (--dbench_seed). Google Benchmark runs them in that order, one
// repetition each (the driver turns its random interleaving off), so the JSON lists each name's
// rounds in time order and a case's round r sits at most a group away from its floor's round r.
//
// Torch-free: the entries hold their calls as closures (driver.h add() makes them).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dbench::driver {

struct Schedule {
  int rounds = 0;  // 0: Google Benchmark's repetitions, randomly interleaved
  double block_seconds = 0.0025;
  unsigned seed = 0;
  struct Entry {
    std::string group;
    std::function<int64_t()> calibrate;           // the block's calls, under the case's mode
    std::function<void(int64_t calls)> enrol;     // one registration: one round's block
  };
  std::vector<Entry> entries;
};

// The process's schedule: set from the command line, filled as the cases are registered.
Schedule& schedule();

// "<op>/<kind>/<mode>" -> "<op>/<mode>": the benchmarks paired with one floor.
std::string group_of(const std::string& name);

// Every entry's block calls, then its R registrations in the grouped order.
void enrol_rounds(Schedule& s);

// One registration of a benchmark body, timed as every benchmark here is.
template <class B>
auto* register_timed(const std::string& name, B body) {
  return benchmark::RegisterBenchmark(name.c_str(), body)
      ->UseRealTime()  // wall clock decides the iteration count; real_time is the metric
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace dbench::driver
