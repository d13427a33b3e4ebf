// dbench_cpp_driver: the boundary (and args) scenario called from C++, on Google Benchmark.
//
// For each boundary op (the native declarations with kBoundary: ops/native/*.h; inputs (4, 32)
// float32 like the Python scenario, scalars the declaration's kBoundaryScalars) it times one call of:
//   <op>/direct/inference            the op's ATen launcher, no dispatcher
//   <op>/typed/inference             dbench::<op> through a TypedOperatorHandle (unboxed)
//   <op>/boxed/inference             dbench::<op> through callBoxed on a Stack
//   <op>/stable/inference            dbench_stable::<op> (boxed TORCH_BOX kernel), typed call
//   <op>/autograd/inference          dbench::<op>_autograd, typed call, no input requires grad
//   <op>/autograd/fwd_requires_grad  the same with every tensor input requiring grad
//   <op>/autograd/fwd_bwd            that forward + torch::autograd::grad
// and each */inference benchmark again as */no_grad (under at::NoGradGuard) and
// */inference_mode (under c10::InferenceMode), the C++ forms of torch.no_grad()
// and torch.inference_mode(): the guard is entered once per run of the loop,
// outside it, as the Python runner enters a case's context once per block.
// Google Benchmark appends "/real_time" to each name (UseRealTime).
//
// The metric is wall-clock time per call (real_time), as in the Python runner.
// CPU time would understate fwd_bwd on CUDA: the backward runs on autograd's
// device thread while the caller waits (H200: real 45 us, cpu 15 us per call).
// Each benchmark is first called once and checked: its output against the launcher's, and in
// fwd_bwd its gradients against a float64 central difference of the launcher along a random
// direction (the launcher itself is checked against the fp64 reference by the Python contract
// checks); a mismatch or an exception is reported with SkipWithError ("error_occurred" in the
// JSON) and never timed.
//
// With --dbench_args_op (the args scenario) it times the generated ops of that
// scenario instead, below ("The args scenario").
//
// Rounds (--dbench_rounds=R): in place of Google Benchmark's randomly interleaved repetitions, R
// rounds of one fixed-length block per benchmark, each round in the grouped order (a case beside
// its floor: "The rounds schedule" below), so that a case and its floor are timed close together.
//
// Flags of this driver (parsed and removed before benchmark::Initialize):
//   --dbench_device=cpu|cuda|cuda:N  (default: $DBENCH_DEVICE, else cpu)
//   --dbench_min_time=SECONDS        min time per repetition, written in the
//                                    --benchmark_min_time syntax of the linked
//                                    Google Benchmark (1.7: "0.1", 1.8: "0.1s")
//   --dbench_threads=N               at::set_num_threads (default 1, like run.py)
//   --dbench_no_pin                  do not pin the process to one core
//   --dbench_gpu_timer=cupti|off     cupti: the GPU pass (CUDA only, below); default off
//   --dbench_rounds=N                the rounds schedule, N rounds (CPU run only; default: repetitions)
//   --dbench_block_time=SECONDS      its block per benchmark and round (default 0.0025)
//   --dbench_seed=N                  its rounds' order (default 0)
//   --dbench_args_op=NAME|ARITY|KIND|REST|SIGNATURE   (repeatable) an op of the args scenario
//   --dbench_args_shape=D[xD...]     the args scenario's tensor shape (default 16)
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
// closed after the post-loop sync, then flushed. Each run gets the user
// counters gpu_us (GPU-busy time per call: the union of the block's kernel,
// memcpy and memset intervals, as the Python GPU rows define it) and
// kernels_per_call. CUPTI adds CPU cost to every launch, so a GPU pass is a
// separate run of the driver and its real_time is not a CPU figure
// (bench/cpp_results.py takes only the counters from it): the CPU rows come
// from a run without CUPTI, exactly as before. When CUPTI cannot be used the
// pass goes on without counters, says why in one line on stderr and in the
// context (dbench_gpu_timer=unavailable, dbench_gpu_timer_error); a block
// CUPTI could not time is a SkipWithError ("error_occurred"), never a number.
// Context dbench_gpu_timer: off (no GPU pass), cupti, or unavailable.
//
// This is the driver's only translation unit that includes torch headers.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/add.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/randn_like.h>
#include <ATen/ops/sum.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/version.h>

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <array>
#include <map>
#include <random>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "launchers.h"
#include "native_ops.h"
#include "runtime_library.h"

#ifdef DBENCH_DRIVER_CUPTI
#include "blocks.h"  // bench/cupti: the CUPTI collector's per-block figures
#endif

#ifndef DBENCH_BENCHMARK_VERSION
#define DBENCH_BENCHMARK_VERSION "unknown"
#endif
// 1 when the linked Google Benchmark (>= 1.8) wants "--benchmark_min_time=<x>s".
#ifndef DBENCH_MIN_TIME_SUFFIX_S
#define DBENCH_MIN_TIME_SUFFIX_S 0
#endif

// libdbench_stable.so (ops/csrc/stable_library.cpp): defines ns::name as a stable-ABI op whose
// boxed kernel copies the first argument and frees the others, all of schema type `rest`.
extern "C" int dbench_stable_define_copy_first(const char* ns, const char* name, const char* signature,
                                               const char* rest, char* error, size_t error_size);

namespace {

constexpr int64_t kRows = 4, kCols = 32;  // OpContract.boundary_shape
constexpr double kAtol = 1e-5, kRtol = 1e-5;  // scenarios/base.py TOLERANCES[float32]

using Tensors = std::vector<at::Tensor>;

// ---------------------------------------------------------------------------
// CUDA synchronisation, without CUDA headers: the CUDA DeviceGuardImpl is
// registered by libc10_cuda when torch has CUDA.
//
// "CPU cost per call" follows bench/runner.py::time_block: the device queue is
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

// ---------------------------------------------------------------------------
template <class Sig>
c10::TypedOperatorHandle<Sig> typed_op(const std::string& name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "").typed<Sig>();
}

// The op's handle, or nullopt with `err` saying which library to link.
template <class Sig>
std::optional<c10::TypedOperatorHandle<Sig>> find_op(const std::string& qualified, const char* library,
                                                     std::string& err) {
  try {
    return typed_op<Sig>(qualified);
  } catch (const std::exception&) {
    err = "op not registered: " + qualified + " (is " + library + " linked?)";
    return std::nullopt;
  }
}

c10::OperatorHandle boxed_op(const std::string& name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "");
}

// An op as the driver calls it, from its declaration: `t` are its tensor inputs, in order; its
// scalar arguments are the declaration's kBoundaryScalars, in order.
template <class Op, class A = typename Op::Args>
struct Driven;
template <class Op, class... K>
struct Driven<Op, dbench::native::Args<K...>> {
  using Sig = dbench::AtenSig<Op>;
  static constexpr size_t kTensors = Op::Args::kTensors;
  static constexpr std::array<bool, sizeof...(K)> kIsTensor{std::is_same_v<K, dbench::native::Tensor>...};

  static constexpr size_t tensors_before(size_t i) {
    size_t n = 0;
    for (size_t j = 0; j < i; ++j) n += kIsTensor[j] ? 1 : 0;
    return n;
  }
  template <size_t I>
  static decltype(auto) arg(const Tensors& t) {
    if constexpr (kIsTensor[I]) {
      return (t[tensors_before(I)]);
    } else {
      return std::get<I - tensors_before(I)>(Op::kBoundaryScalars);
    }
  }
  template <class F, size_t... I>
  static decltype(auto) apply(const Tensors& t, F&& f, std::index_sequence<I...>) {
    return f(arg<I>(t)...);
  }
  template <class F>
  static decltype(auto) apply(const Tensors& t, F&& f) {
    return apply(t, std::forward<F>(f), std::index_sequence_for<K...>{});
  }

  static at::Tensor direct(const Tensors& t) {
    return apply(t, [](const auto&... a) { return dbench::AtenLauncher<Op>::call(a...); });
  }
  static at::Tensor typed(const c10::TypedOperatorHandle<Sig>& op, const Tensors& t) {
    return apply(t, [&op](const auto&... a) { return op.call(a...); });
  }
  static void push(torch::jit::Stack& s, const Tensors& t) {
    apply(t, [&s](const auto&... a) { (s.emplace_back(a), ...); });
  }
};

// ---------------------------------------------------------------------------
// Inputs and pre-flight checks.

struct Config {
  c10::Device device{c10::kCPU};
  Timing timing;
};

Tensors make_inputs(size_t n, const Config& cfg, bool requires_grad) {
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(cfg.device);
  Tensors t;
  for (size_t i = 0; i < n; ++i) {
    t.push_back(at::randn({kRows, kCols}, opts).set_requires_grad(requires_grad));
  }
  return t;
}

void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  if (!got.defined()) throw std::runtime_error(what + ": undefined result");
  if (got.sizes() != want.sizes()) throw std::runtime_error(what + ": wrong shape");
  if (!at::allclose(got.detach(), want.detach(), kRtol, kAtol)) {
    throw std::runtime_error(what + ": result differs from the ATen reference");
  }
}

// Runs `check` once; returns "" or the reason the case must not be timed.
template <class F>
std::string preflight(const std::string& name, F&& check) {
  try {
    check();
    return "";
  } catch (const std::exception& e) {
    std::string msg = e.what();
    const auto nl = msg.find('\n');
    if (nl != std::string::npos) msg.resize(nl);
    return "pre-flight check failed (" + name + "): " + msg.substr(0, 300);
  }
}

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

// The forward-only modes: no input requires grad, and the grad mode the call runs under.
enum class Forward { kInference, kNoGrad, kInferenceMode };
constexpr std::array<std::pair<Forward, const char*>, 3> kForwardModes{
    {{Forward::kInference, "inference"}, {Forward::kNoGrad, "no_grad"}, {Forward::kInferenceMode, "inference_mode"}}};

// f() under the mode's guard (RAII: the previous grad mode is back when it returns).
template <class F>
void under(Forward mode, F&& f) {
  if (mode == Forward::kNoGrad) {
    const at::NoGradGuard guard;
    f();
  } else if (mode == Forward::kInferenceMode) {
    const c10::InferenceMode guard;
    f();
  } else {
    f();
  }
}

// ---------------------------------------------------------------------------
// The rounds schedule (--dbench_rounds=R, the CPU run of the grouped order: bench/runner.py
// round_order). Google Benchmark's random interleaving shuffles every repetition of every benchmark,
// so a case's k-th repetition and its floor's lie at unrelated times, and on a host whose CPU
// drifts between speed states their ratio scatters with the drift. Here each benchmark's block
// length is fixed first (calibrate_calls: the calls that fill --dbench_block_time), then the
// benchmarks are registered R times, round after round: in each round the benchmarks of one group
// (an op's kinds in one mode, its `direct` floor among them) lie together, the groups and the
// members of each in a random order (--dbench_seed). Google Benchmark runs them in that order, one
// repetition each (the driver turns its random interleaving off), so the JSON lists each name's
// rounds in time order and a case's round r sits at most a group away from its floor's round r.

// The calls of one block of `seconds`, found as bench/runner.py calibrate finds them (the drain
// of the device queue after the calls counted); these calls are also the case's warm-up.
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

Schedule& schedule() {
  static Schedule s;
  return s;
}

// "<op>/<kind>/<mode>" -> "<op>/<mode>": the benchmarks paired with one floor.
std::string group_of(const std::string& name) {
  const size_t first = name.find('/');
  const size_t second = name.find('/', first + 1);
  if (first == std::string::npos || second == std::string::npos) return name;
  return name.substr(0, first) + name.substr(second);
}

// Every entry's block calls, then its R registrations in the grouped order.
void enrol_rounds(Schedule& s) {
  std::vector<int64_t> calls;
  calls.reserve(s.entries.size());
  for (auto& e : s.entries) calls.push_back(e.calibrate());
  std::vector<std::vector<size_t>> groups;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < s.entries.size(); ++i) {
    const auto [at, fresh] = index.emplace(s.entries[i].group, groups.size());
    if (fresh) groups.emplace_back();
    groups[at->second].push_back(i);
  }
  std::mt19937 rng(s.seed);
  for (int r = 0; r < s.rounds; ++r) {
    std::shuffle(groups.begin(), groups.end(), rng);
    for (auto& g : groups) {
      std::shuffle(g.begin(), g.end(), rng);
      for (const size_t i : g) s.entries[i].enrol(calls[i]);
    }
  }
  s.entries.clear();  // the registrations hold their own copies of the calls and inputs
}

// One registration of a benchmark body, timed as every benchmark here is.
template <class B>
auto* register_timed(const std::string& name, B body) {
  return benchmark::RegisterBenchmark(name.c_str(), body)
      ->UseRealTime()  // wall clock decides the iteration count; real_time is the metric
      ->Unit(benchmark::kMicrosecond);
}

template <class F>
void add(const std::string& name, std::string error, const Timing& timing, F call,
         Forward mode = Forward::kInference) {
  auto body = [error, timing, call, mode](benchmark::State& state) mutable {
    under(mode, [&] { time_calls(state, error, timing, call); });
  };
  Schedule& s = schedule();
  if (s.rounds == 0 || !error.empty()) {  // a case that cannot run is registered once, to say why
    register_timed(name, body);
    return;
  }
  s.entries.push_back(
      {group_of(name),
       [timing, call, mode, seconds = s.block_seconds]() mutable {
         int64_t n = 1;
         under(mode, [&] { n = calibrate_calls(timing, call, seconds); });
         return n;
       },
       [name, body](int64_t calls) { register_timed(name, body)->Iterations(calls)->Repetitions(1); }});
}

// `<prefix>/<mode>` for every forward mode: checked (check(call) under the mode's guard) unless
// `error` already says why it cannot run, then registered.
template <class F, class Check>
void add_forward(const std::string& prefix, const std::string& error, const Timing& timing, F call, Check check) {
  for (const auto& entry : kForwardModes) {
    const Forward mode = entry.first;  // (not a structured binding: C++17 lambdas cannot capture those)
    const std::string name = prefix + "/" + entry.second;
    const std::string err = error.empty() ? preflight(name, [&] { under(mode, [&] { check(call); }); }) : error;
    add(name, err, timing, call, mode);
  }
}

// The gradients `got` of <grad_out, op(xg)> against a float64 central difference of the launcher
// along a random direction v: sum_i <got_i, v_i> = d/ds <grad_out, op(xg + s v)> at s = 0. No
// formula is needed, so every declared op is checked the same way.
template <class D>
void expect_gradients(const Tensors& xg, const Tensors& got, const at::Tensor& grad_out) {
  if (got.size() != xg.size()) throw std::runtime_error("wrong number of gradients");
  Tensors x64, v;
  for (const auto& t : xg) {
    x64.push_back(t.detach().to(at::kDouble));
    v.push_back(at::randn_like(x64.back()));
  }
  const at::Tensor g64 = grad_out.to(at::kDouble);
  auto along = [&](double s) {
    Tensors moved;
    for (size_t i = 0; i < x64.size(); ++i) moved.push_back(at::add(x64[i], at::mul(v[i], s)));
    return at::sum(at::mul(D::direct(moved), g64)).template item<double>();
  };
  constexpr double kStep = 1e-6;
  const double numeric = (along(kStep) - along(-kStep)) / (2 * kStep);
  double analytic = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i].defined()) throw std::runtime_error("gradient " + std::to_string(i) + " is undefined");
    analytic += at::sum(at::mul(got[i].to(at::kDouble), v[i])).template item<double>();
  }
  if (std::abs(numeric - analytic) > 1e-3 * std::max(1.0, std::abs(numeric))) {
    throw std::runtime_error("gradients differ from a central difference of the launcher (" + std::to_string(analytic) +
                             " vs " + std::to_string(numeric) + " along a random direction)");
  }
}

template <class Op>
void register_op(const Config& cfg) {
  using D = Driven<Op>;
  const std::string op = Op::kName;
  const Tensors x = make_inputs(D::kTensors, cfg, false);
  const Tensors xg = make_inputs(D::kTensors, cfg, true);
  const at::Tensor grad_out = at::randn({kRows, kCols}, at::TensorOptions().dtype(at::kFloat).device(cfg.device));
  const at::Tensor want = D::direct(x);
  const at::Tensor want_g = D::direct(xg).detach();
  const std::string qualified = "dbench::" + op;
  const std::string qualified_ag = qualified + dbench::native::kAutogradSuffix;
  const std::string qualified_stable = "dbench_stable::" + op;

  auto close_to_want = [&](const char* what) {
    return [&want, what](auto& call) { expect_close(call(), want, what); };
  };
  const auto none = [] { return at::Tensor(); };

  // direct: the launcher, no dispatcher.
  add_forward(op + "/direct", "", cfg.timing, [x] { return D::direct(x); }, close_to_want("direct"));

  // A typed call of a registered op; the handle is resolved once, here,
  // outside the timed loop. Returns whether the op was found.
  auto add_typed = [&](const std::string& name, const std::string& qualified_name, const char* library) {
    std::string err;
    const auto handle = find_op<typename D::Sig>(qualified_name, library, err);
    if (!handle) {
      add_forward(op + "/" + name, err, cfg.timing, none, close_to_want(""));
      return false;
    }
    add_forward(op + "/" + name, "", cfg.timing, [x, h = *handle] { return D::typed(h, x); },
                [&want, &name](auto& call) { expect_close(call(), want, name); });
    return true;
  };

  // typed and boxed: the TORCH_LIBRARY op through the dispatcher.
  if (add_typed("typed", qualified, "libdbench_ops.so")) {
    // boxed: callBoxed consumes its arguments and leaves the outputs, so the
    // stack is refilled each iteration (one vector, reused: clear() keeps its
    // capacity, so the loop times boxing and dispatch, not the allocator).
    auto boxed = [x, h = boxed_op(qualified), stack = torch::jit::Stack()]() mutable {
      stack.clear();
      D::push(stack, x);
      h.callBoxed(stack);
      return std::move(stack.back());
    };
    add_forward(op + "/boxed", "", cfg.timing, boxed,
                [&want](auto& call) { expect_close(call().toTensor(), want, "boxed"); });
  } else {
    add_forward(op + "/boxed", "op not registered: " + qualified, cfg.timing, none, close_to_want(""));
  }

  // stable: the STABLE_TORCH_LIBRARY op (a boxed TORCH_BOX kernel), typed call.
  add_typed("stable", qualified_stable, "libdbench_stable.so");

  // autograd: the *_autograd twin (C++ Autograd-key kernel), typed call.
  {
    std::string err;
    const auto handle = find_op<typename D::Sig>(qualified_ag, "libdbench_ops.so", err);
    if (!handle) {
      add_forward(op + "/autograd", err, cfg.timing, none, close_to_want(""));
      for (const char* mode : {"fwd_requires_grad", "fwd_bwd"}) {
        add(op + "/autograd/" + mode, err, cfg.timing, none);
      }
      return;
    }
    const auto h = *handle;
    add_forward(op + "/autograd", "", cfg.timing, [x, h] { return D::typed(h, x); },
                close_to_want("autograd forward-only"));

    auto fwd = [xg, h] { return D::typed(h, xg); };
    err = preflight(op + "/autograd/fwd_requires_grad", [&] {
      const at::Tensor out = fwd();
      if (!out.requires_grad()) throw std::runtime_error("output does not require grad");
      expect_close(out, want_g, "autograd forward");
    });
    add(op + "/autograd/fwd_requires_grad", err, cfg.timing, fwd);

    auto fwd_bwd = [xg, h, grad_out] {
      const at::Tensor out = D::typed(h, xg);
      return torch::autograd::grad({out}, xg, {grad_out});
    };
    err = preflight(op + "/autograd/fwd_bwd", [&] { expect_gradients<D>(xg, fwd_bwd(), grad_out); });
    add(op + "/autograd/fwd_bwd", err, cfg.timing, fwd_bwd);
  }
}

// ---------------------------------------------------------------------------
// The args scenario (scenarios/args.py): what a call costs by the number and kind of its arguments.
// Each op comes on the command line as NAME|ARITY|KIND|REST|SIGNATURE (REST: the schema type of the
// arguments after the first) and is defined here as the scenario defines it in Python:
// dbench_args::NAME, a torch::Library fragment with one boxed kernel that copies the first argument
// (ops/csrc/runtime_library.cpp), and dbench_stable::NAME, its stable-ABI twin. Neither has an
// autograd formula in C++, so only inference is timed:
//   NAME/direct/inference   the noop launcher on the first tensor (the floor: it does not grow)
//   NAME/typed/inference    dbench_args::NAME through a TypedOperatorHandle
//   NAME/boxed/inference    dbench_args::NAME through callBoxed on a Stack
//   NAME/stable/inference   dbench_stable::NAME through a TypedOperatorHandle
// A typed call needs its signature at compile time: one instantiation per kind and arity of
// kArities. Every call goes through a std::function, the floor's too, so that indirection cancels.

struct ArgsOp {
  std::string name;
  size_t arity = 0;
  std::string kind;  // scenarios/arity.py ARG_KINDS
  std::string rest;  // scenarios/args.py REST_TYPE
  std::string signature;
};

constexpr std::array<size_t, 7> kArities{1, 2, 4, 8, 16, 32, 64};  // scenarios/arity.py ARITIES
// The scalar arguments' values (scenarios/args.py SCALARS).
constexpr double kFloatArg = 0.5;
constexpr int64_t kIntArg = 1;
constexpr bool kBoolArg = true;
constexpr const char* kStrArg = "a";

using Call = std::function<at::Tensor()>;

template <class T, size_t>
using Repeat = T;

// An op's arguments, made once: the first tensor, the tensors after it (tensor, mutable, list and
// optional kinds), and every argument as the boxed call pushes it.
struct ArgsInputs {
  at::Tensor x0;
  Tensors rest;
  std::vector<c10::IValue> boxed;
};

ArgsInputs args_inputs(const ArgsOp& op, const Config& cfg, const std::vector<int64_t>& shape) {
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(cfg.device);
  ArgsInputs in;
  in.x0 = at::randn(shape, opts);
  in.boxed.emplace_back(in.x0);
  const size_t n = op.arity - 1;
  const bool tensors = op.kind == "tensor" || op.kind == "mutable" || op.kind == "optional" || op.kind == "list";
  for (size_t i = 0; tensors && i < n; ++i) in.rest.push_back(at::randn(shape, opts));
  if (op.kind == "list") {
    c10::List<at::Tensor> list;
    for (const auto& t : in.rest) list.push_back(t);
    in.boxed.emplace_back(std::move(list));
    return in;
  }
  for (size_t i = 0; i < n; ++i) {
    if (tensors) {
      in.boxed.emplace_back(in.rest[i]);
    } else if (op.kind == "float") {
      in.boxed.emplace_back(kFloatArg);
    } else if (op.kind == "int") {
      in.boxed.emplace_back(kIntArg);
    } else if (op.kind == "bool") {
      in.boxed.emplace_back(kBoolArg);
    } else if (op.kind == "str") {
      in.boxed.emplace_back(std::string(kStrArg));
    } else {
      throw std::runtime_error("unknown argument kind '" + op.kind + "'");
    }
  }
  return in;
}

// A typed call with the arguments after the first all of type Rest, held as Stored.
template <class Rest, class Stored, size_t... I>
Call typed_call(const std::string& qualified, const at::Tensor& x0, std::vector<Stored> rest,
                std::index_sequence<I...>) {
  const auto h = typed_op<at::Tensor(const at::Tensor&, Repeat<Rest, I>...)>(qualified);
  return [h, x0, rest = std::move(rest)] { return h.call(x0, rest[I]...); };
}

// The mutable kind: plain tensors, of which the last is declared Tensor(a!) (a non-const reference).
template <size_t... I>
Call typed_mutable_call(const std::string& qualified, const at::Tensor& x0, const Tensors& rest,
                        std::index_sequence<I...>) {
  const auto h = typed_op<at::Tensor(const at::Tensor&, Repeat<const at::Tensor&, I>..., at::Tensor&)>(qualified);
  return [h, x0, rest, last = rest.back()]() mutable { return h.call(x0, rest[I]..., last); };
}

// make(std::integral_constant<size_t, N>) for the N of kArities equal to `arity`.
template <class Make, size_t... K>
Call for_arity(size_t arity, Make&& make, std::index_sequence<K...>) {
  Call out;
  const bool found = ((arity == kArities[K] ? (out = make(std::integral_constant<size_t, kArities[K]>{}), true)
                                            : false) || ...);
  if (!found) throw std::runtime_error("arity " + std::to_string(arity) + " is not one this driver was built for");
  return out;
}

Call typed_args_call(const ArgsOp& op, const std::string& qualified, const ArgsInputs& in) {
  if (op.kind == "list") {
    const auto h = typed_op<at::Tensor(const at::Tensor&, at::TensorList)>(qualified);
    return [h, x0 = in.x0, rest = in.rest] { return h.call(x0, rest); };
  }
  auto make = [&](auto n) -> Call {
    constexpr size_t kRest = decltype(n)::value - 1;  // the arguments after the first
    const auto seq = std::make_index_sequence<kRest>{};
    if (op.kind == "tensor") return typed_call<const at::Tensor&>(qualified, in.x0, in.rest, seq);
    if (op.kind == "optional") {
      return typed_call<const std::optional<at::Tensor>&>(
          qualified, in.x0, std::vector<std::optional<at::Tensor>>(in.rest.begin(), in.rest.end()), seq);
    }
    if (op.kind == "float") return typed_call<double>(qualified, in.x0, std::vector<double>(kRest, kFloatArg), seq);
    if (op.kind == "int") return typed_call<int64_t>(qualified, in.x0, std::vector<int64_t>(kRest, kIntArg), seq);
    if (op.kind == "bool") return typed_call<bool>(qualified, in.x0, std::vector<bool>(kRest, kBoolArg), seq);
    if (op.kind == "str") {
      return typed_call<c10::string_view>(qualified, in.x0, std::vector<std::string>(kRest, kStrArg), seq);
    }
    if (op.kind == "mutable") {
      if constexpr (kRest >= 1) {
        return typed_mutable_call(qualified, in.x0, in.rest, std::make_index_sequence<kRest - 1>{});
      }
      throw std::runtime_error("a mutable op takes two arguments or more");
    }
    throw std::runtime_error("unknown argument kind '" + op.kind + "'");
  };
  return for_arity(op.arity, make, std::make_index_sequence<kArities.size()>{});
}

// callBoxed consumes its arguments: the stack is refilled from the prepared values each call (a
// Tensor[] is built once, as the tensors are; a caller that builds its list per call pays for that too).
Call boxed_args_call(const std::string& qualified, const ArgsInputs& in) {
  return [h = boxed_op(qualified), args = in.boxed, stack = torch::jit::Stack()]() mutable {
    stack.clear();
    stack.insert(stack.end(), args.begin(), args.end());
    h.callBoxed(stack);
    return std::move(stack.back()).toTensor();
  };
}

// Defines dbench_args::NAME and dbench_stable::NAME; "" or why they could not be.
std::string define_args_op(const ArgsOp& op) {
  try {
    dbench::define_copy_first_op("dbench_args", op.name, op.signature);
  } catch (const std::exception& e) {
    return "could not define dbench_args::" + op.name + ": " + e.what();
  }
  std::array<char, 512> error{};
  if (dbench_stable_define_copy_first("dbench_stable", op.name.c_str(), op.signature.c_str(), op.rest.c_str(),
                                      error.data(), error.size()) != 0) {
    return "could not define dbench_stable::" + op.name + ": " + error.data();
  }
  return "";
}

void register_args_op(const ArgsOp& op, const Config& cfg, const std::vector<int64_t>& shape) {
  const ArgsInputs in = args_inputs(op, cfg, shape);
  const std::string defined = define_args_op(op);
  const auto none = [] { return at::Tensor(); };
  auto add_checked = [&](const std::string& kind, const std::function<Call()>& make) {
    const std::string name = op.name + "/" + kind + "/inference";
    Call call = none;
    std::string err = defined;
    if (err.empty()) {
      err = preflight(name, [&] {
        call = make();
        expect_close(call(), in.x0, kind + " (a copy of the first argument)");
      });
    }
    add(name, err, cfg.timing, call);  // with an error, the benchmark skips and never calls it
  };
  add_checked("direct", [&] { return Call([x0 = in.x0] { return dbench::launch<dbench::native::noop>(x0); }); });
  add_checked("typed", [&] { return typed_args_call(op, "dbench_args::" + op.name, in); });
  add_checked("boxed", [&] { return boxed_args_call("dbench_args::" + op.name, in); });
  add_checked("stable", [&] { return typed_args_call(op, "dbench_stable::" + op.name, in); });
}

// A positive integer, or std::invalid_argument naming `what`.
size_t positive(const std::string& text, const char* what) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < 1) {
    throw std::invalid_argument(std::string(what) + " must be a positive integer, got '" + text + "'");
  }
  return static_cast<size_t>(value);
}

// NAME|ARITY|KIND|REST|SIGNATURE; throws std::invalid_argument with what is wrong.
ArgsOp parse_args_op(const std::string& spec) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t bar = spec.find('|', start);
    if (bar == std::string::npos) throw std::invalid_argument("expected NAME|ARITY|KIND|REST|SIGNATURE");
    parts.push_back(spec.substr(start, bar - start));
    start = bar + 1;
  }
  parts.push_back(spec.substr(start));
  ArgsOp op{parts[0], positive(parts[1], "ARITY"), parts[2], parts[3], parts[4]};
  if (op.name.empty() || op.signature.empty()) throw std::invalid_argument("NAME and SIGNATURE must not be empty");
  const std::array<const char*, 8> kinds{"tensor", "optional", "list", "mutable", "float", "int", "bool", "str"};
  if (std::find(kinds.begin(), kinds.end(), op.kind) == kinds.end()) {
    throw std::invalid_argument("KIND must be one of tensor, optional, list, mutable, float, int, bool, str");
  }
  return op;
}

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t x = std::min(text.find('x', start), text.size());
    shape.push_back(static_cast<int64_t>(positive(text.substr(start, x - start), "a dimension")));
    start = x + 1;
  }
  return shape;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out;
  for (const int64_t d : shape) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

// ---------------------------------------------------------------------------
// Command line.

struct Options {
  std::string device;
  double min_time = -1;  // < 0: Google Benchmark's default
  int threads = 1;
  bool pin = true;
  bool gpu_timer = false;  // --dbench_gpu_timer=cupti
  int rounds = 0;  // --dbench_rounds: the rounds schedule (0: repetitions)
  double block_time = 0.0025;  // --dbench_block_time: a round's block per benchmark, seconds
  unsigned seed = 0;  // --dbench_seed: the rounds' order
  std::vector<ArgsOp> args_ops;  // --dbench_args_op: the args scenario's ops instead of the boundary ones
  std::vector<int64_t> args_shape{16};  // --dbench_args_shape (scenarios/args.py SHAPE)
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "dbench_cpp_driver: " << msg << "\n";
  std::exit(2);
}

// Removes the --dbench_* flags from argv.
Options parse_own_flags(int& argc, char** argv) {
  Options o;
  const char* env = std::getenv("DBENCH_DEVICE");
  o.device = env && *env ? env : "cpu";
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const std::string& flag) -> const char* {
      return a.rfind(flag + "=", 0) == 0 ? argv[i] + flag.size() + 1 : nullptr;
    };
    try {
      if (const char* v = value("--dbench_device")) {
        o.device = v;
      } else if (const char* v = value("--dbench_min_time")) {
        o.min_time = std::stod(v);
      } else if (const char* v = value("--dbench_threads")) {
        o.threads = std::stoi(v);
      } else if (a == "--dbench_no_pin") {
        o.pin = false;
      } else if (const char* v = value("--dbench_gpu_timer")) {
        const std::string t = v;
        if (t != "cupti" && t != "off") usage_error("--dbench_gpu_timer must be cupti or off, got '" + t + "'");
        o.gpu_timer = t == "cupti";
      } else if (const char* v = value("--dbench_rounds")) {
        o.rounds = static_cast<int>(positive(v, "--dbench_rounds"));
      } else if (const char* v = value("--dbench_block_time")) {
        o.block_time = std::stod(v);
        if (!(o.block_time > 0 && o.block_time < 10)) usage_error("--dbench_block_time must lie in (0, 10) seconds");
      } else if (const char* v = value("--dbench_seed")) {
        o.seed = static_cast<unsigned>(std::stoul(v));
      } else if (const char* v = value("--dbench_args_op")) {
        try {
          o.args_ops.push_back(parse_args_op(v));
        } catch (const std::logic_error& e) {
          usage_error("bad --dbench_args_op '" + std::string(v) + "': " + e.what());
        }
      } else if (const char* v = value("--dbench_args_shape")) {
        try {
          o.args_shape = parse_shape(v);
        } catch (const std::logic_error& e) {
          usage_error("bad --dbench_args_shape '" + std::string(v) + "': " + e.what());
        }
      } else if (a.rfind("--dbench_", 0) == 0) {
        usage_error("unknown flag " + a +
                    " (valid: --dbench_device=cpu|cuda|cuda:N, --dbench_min_time=SECONDS, "
                    "--dbench_threads=N, --dbench_no_pin, --dbench_gpu_timer=cupti|off, --dbench_rounds=N, "
                    "--dbench_block_time=SECONDS, --dbench_seed=N, "
                    "--dbench_args_op=NAME|ARITY|KIND|REST|SIGNATURE, --dbench_args_shape=D[xD...])");
      } else {
        argv[out++] = argv[i];
      }
    } catch (const std::logic_error&) {
      usage_error("bad value in " + a);
    }
  }
  argc = out;
  argv[argc] = nullptr;
  return o;
}

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

int pin_to_one_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) last = c;
  }
  if (last < 0) return -1;
  CPU_ZERO(&set);
  CPU_SET(last, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0 ? last : -1;
}

// A reason on one line (libcupti's load failure lists every path tried, one per line).
std::string one_line(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    if (ch != '\n') {
      out += ch;
    } else if (!out.empty()) {
      out += "; ";
    }
  }
  return out;
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
  // bench/gputimer.py). Idempotent; a failure is a warning: the results are written.
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

std::string min_time_flag(double seconds) {
  std::ostringstream v;
  v << "--benchmark_min_time=" << seconds << (DBENCH_MIN_TIME_SUFFIX_S ? "s" : "");
  return v.str();
}

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
      dbench::native::for_each(dbench::native::AllOps{}, [&](auto tag) {
        using Op = typename decltype(tag)::type;
        if constexpr (Op::kBoundary) register_op<Op>(cfg);
      });
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
