// dbench_cpp_driver: the boundary (and args) scenario called from C++, on Google Benchmark.
//
// The driver's files, by concern:
//   main.cpp      this: the device, the GPU pass and main()
//   options.*     the driver's own flags (--dbench_*) and torch-free set-up helpers
//   timing.h      how a benchmark's calls are timed (device sync, timed loop, CUPTI block)
//   schedule.*    the rounds schedule (--dbench_rounds), torch-free
//   driver.h      what the scenarios share: Config, op lookups, pre-flight checks, add()
//   boundary.cpp  the boundary scenario's cases (the native declarations with kBoundary)
//   args.cpp      the args scenario's cases (--dbench_args_op)
// Only main.cpp, boundary.cpp and args.cpp include ATen headers (the machine builds on 2 cores).
//
// Google Benchmark appends "/real_time" to each name (UseRealTime).
// The metric is wall-clock time per call (real_time), as in the Python runner.
// CPU time would understate fwd_bwd on CUDA: the backward runs on autograd's
// device thread while the caller waits (H200: real 45 us, cpu 15 us per call).
//
// With --dbench_args_op (the args scenario) it times the generated ops of that
// scenario instead (args.cpp).
//
// Rounds (--dbench_rounds=R): in place of Google Benchmark's randomly interleaved repetitions, R
// rounds of one fixed-length block per benchmark, each round in the grouped order (a case beside
// its floor: schedule.h), so that a case and its floor are timed close together.
//
// Flags of this driver: options.h.
// Exit status: 0 ok, 1 bad --benchmark_* flag, 2 bad --dbench_* flag or set-up
// failure (e.g. no CUDA), 3 no benchmark matched --benchmark_filter.
// Defaults given to Google Benchmark (later flags on the command line win):
//   --benchmark_repetitions=9 --benchmark_enable_random_interleaving=true
// What the driver decided (device, threads, pinned core, torch version...) is
// added to the JSON "context" block with AddCustomContext (keys dbench_*).
//
// GPU pass (--dbench_gpu_timer=cupti, CUDA devices only): the suite's CUPTI
// collector (bench/cupti) is enabled once, before the inputs and pre-flight
// checks are made (their kernels fall in no block), and
// every timed loop is a CUPTI block: opened after the pre-loop device sync,
// closed after the post-loop sync, then flushed (timing.h). Each run gets the user
// counters gpu_us (GPU-busy time per call: the union of the block's kernel,
// memcpy and memset intervals, as the Python GPU rows define it) and
// kernels_per_call. CUPTI adds CPU cost to every launch, so a GPU pass is a
// separate run of the driver and its real_time is not a CPU figure
// (bench/io/cpp_results.py takes only the counters from it): the CPU rows come
// from a run without CUPTI, exactly as before. When CUPTI cannot be used the
// pass goes on without counters, says why in one line on stderr and in the
// context (dbench_gpu_timer=unavailable, dbench_gpu_timer_error); a block
// CUPTI could not time is a SkipWithError ("error_occurred"), never a number.
// Context dbench_gpu_timer: off (no GPU pass), cupti, or unavailable.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/version.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "driver.h"
#include "launchers.h"
#include "options.h"
#include "schedule.h"

#ifdef DBENCH_DRIVER_CUPTI
#include "blocks.h"  // bench/cupti: the CUPTI collector
#endif

#ifndef DBENCH_BENCHMARK_VERSION
#define DBENCH_BENCHMARK_VERSION "unknown"
#endif

using namespace dbench::driver;

namespace {

c10::Device resolve_device(const std::string& name) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (name.rfind("cuda", 0) != 0) usage_error("--dbench_device must be cpu, cuda or cuda:N, got '" + name + "'");
  if (!at::globalContext().hasCUDA()) {
    usage_error("--dbench_device=" + name + ": this torch (" TORCH_VERSION ") has no CUDA device available");
  }
  if (!dbench::has_cuda_kernels()) {
    usage_error("--dbench_device=" + name + ": the dbench kernels were built without CUDA (DBENCH_CUDA)");
  }
  c10::Device d(name);
  if (!d.has_index()) d.set_index(0);
  return d;
}

// --dbench_gpu_timer=cupti: the process-wide CUPTI collector, enabled once for the
// whole run (before the inputs are made, so CUPTI sees the CUDA context from its
// start) and finalized, with the device drained first as cuptiFinalize wants, when
// the run ends. Whether it is on, or why not, goes into the JSON context.
class GpuPass {
 public:
  explicit GpuPass(const Sync& sync) : sync_(sync) {
#ifdef DBENCH_DRIVER_CUPTI
    auto& collector = dbench::cupti::Collector::instance();
    const dbench::cupti::Status s = dbench::cupti::enable_collector(collector);
    on_ = s.ok;
    if (s.ok) {
      library_ = collector.info().library;
    } else {
      why_not_ = one_line(s.reason);
    }
#else
    why_not_ = "this dbench_cpp_driver was built without the CUPTI collector "
               "(bench/cupti is built only when CMake finds cupti.h)";
#endif
  }
  ~GpuPass() { finish(); }
  GpuPass(const GpuPass&) = delete;
  GpuPass& operator=(const GpuPass&) = delete;

  bool on() const { return on_; }

  void add_context() const {
    benchmark::AddCustomContext("dbench_gpu_timer", on_ ? "cupti" : "unavailable");
    if (on_) benchmark::AddCustomContext("dbench_cupti_library", library_);
    if (!on_) benchmark::AddCustomContext("dbench_gpu_timer_error", why_not_);
  }

  void warn_if_off() const {
    if (!on_) std::cerr << "dbench_cpp_driver: warning: no GPU time (--dbench_gpu_timer=cupti): " << why_not_ << "\n";
  }

  // Disable and detach CUPTI (DBENCH_CUPTI_DETACH=0: no cuptiFinalize, as in
  // bench/core/gputimer.py). Idempotent; a failure is a warning: the results are written.
  void finish() noexcept {
#ifdef DBENCH_DRIVER_CUPTI
    if (!on_) return;
    on_ = false;
    try {
      sync_();
    } catch (const std::exception& e) {
      std::cerr << "dbench_cpp_driver: warning: device sync before cuptiFinalize failed: " << one_line(e.what())
                << "\n";
    }
    const char* detach = std::getenv("DBENCH_CUPTI_DETACH");
    const dbench::cupti::Status s =
        dbench::cupti::Collector::instance().finalize(!(detach != nullptr && std::strcmp(detach, "0") == 0));
    if (!s.ok) std::cerr << "dbench_cpp_driver: warning: CUPTI finalize: " << one_line(s.reason) << "\n";
#endif
  }

 private:
  Sync sync_;
  bool on_ = false;
  std::string library_;
  std::string why_not_;
};

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_own_flags(argc, argv);

  // Defaults first, so that the same flags given on the command line win.
  std::vector<std::string> extra = {"--benchmark_repetitions=9", "--benchmark_enable_random_interleaving=true"};
  if (opt.min_time >= 0) extra.push_back(min_time_flag(opt.min_time));
  if (opt.rounds > 0 && opt.gpu_timer) {
    usage_error("--dbench_rounds schedules the CPU run; the GPU pass (--dbench_gpu_timer=cupti) takes repetitions");
  }
  // The rounds schedule runs each registration once, in registration order: last, so they win.
  std::vector<std::string> forced;
  if (opt.rounds > 0) forced = {"--benchmark_repetitions=1", "--benchmark_enable_random_interleaving=false"};
  std::vector<char*> args = {argv[0]};
  for (auto& s : extra) args.push_back(s.data());
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  for (auto& s : forced) args.push_back(s.data());
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;

  Config cfg;
  std::optional<GpuPass> gpu_pass;
  try {
    cfg.device = resolve_device(opt.device);
    cfg.timing.sync.device = cfg.device;
    if (opt.gpu_timer && !cfg.device.is_cuda()) {
      usage_error("--dbench_gpu_timer=cupti times GPU work: it needs --dbench_device=cuda, got '" + opt.device + "'");
    }
    at::set_num_threads(opt.threads);
    const int pinned = opt.pin ? pin_to_one_cpu() : -1;
    at::manual_seed(0);
    if (opt.gpu_timer) {
      gpu_pass.emplace(cfg.timing.sync);
      gpu_pass->warn_if_off();
      gpu_pass->add_context();
      cfg.timing.gpu = gpu_pass->on();  // off: the pass runs on without counters, as its context says
    } else {
      benchmark::AddCustomContext("dbench_gpu_timer", "off");
    }
    schedule().rounds = opt.rounds;
    schedule().block_seconds = opt.block_time;
    schedule().seed = opt.seed;
    const bool args = !opt.args_ops.empty();
    if (args) {
      for (const ArgsOp& op : opt.args_ops) register_args_op(op, cfg, opt.args_shape);
    } else {
      register_boundary_ops(cfg);
    }
    if (opt.rounds > 0) {
      enrol_rounds(schedule());  // calibrates every benchmark (its warm-up), then registers the rounds
      benchmark::AddCustomContext("dbench_rounds", std::to_string(opt.rounds));
      benchmark::AddCustomContext("dbench_block_time", std::to_string(opt.block_time));
      benchmark::AddCustomContext("dbench_seed", std::to_string(opt.seed));
    }
    benchmark::AddCustomContext("dbench_scenario", args ? "args" : "boundary");
    benchmark::AddCustomContext("dbench_device", cfg.device.str());
    benchmark::AddCustomContext("dbench_torch", TORCH_VERSION);
    benchmark::AddCustomContext("dbench_benchmark_version", DBENCH_BENCHMARK_VERSION);
    benchmark::AddCustomContext("dbench_threads", std::to_string(at::get_num_threads()));
    benchmark::AddCustomContext("dbench_pinned_cpu", pinned >= 0 ? std::to_string(pinned) : "none");
    benchmark::AddCustomContext("dbench_shape", shape_text(args ? opt.args_shape : std::vector<int64_t>{kRows, kCols}));
    benchmark::AddCustomContext("dbench_dtype", "float32");
  } catch (const std::exception& e) {
    std::cerr << "dbench_cpp_driver: set-up failed: " << e.what() << "\n";
    return 2;
  }
  const size_t matched = benchmark::RunSpecifiedBenchmarks();
  if (gpu_pass) gpu_pass->finish();
  benchmark::Shutdown();
  if (matched == 0) {
    std::cerr << "dbench_cpp_driver: no benchmark matched --benchmark_filter\n";
    return 3;
  }
  return 0;
}
