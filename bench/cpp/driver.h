// What the driver's two scenarios share: the set-up they run under (Config), the op lookups, the
// pre-flight checks, and add()/add_forward(), which register one case as Google Benchmark runs it
// (repetitions) or as the rounds schedule does (schedule.h). Included by the scenarios' translation
// units (boundary.cpp, args.cpp) and main.cpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/allclose.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <array>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "options.h"
#include "schedule.h"
#include "timing.h"

namespace dbench::driver {

constexpr int64_t kRows = 4, kCols = 32;  // OpContract.boundary_shape
constexpr double kAtol = 1e-5, kRtol = 1e-5;  // scenarios/base.py TOLERANCES[float32]

using Tensors = std::vector<at::Tensor>;

struct Config {
  c10::Device device{c10::kCPU};
  Timing timing;
};

// The scenarios: each registers its cases (boundary.cpp, args.cpp).
void register_boundary_ops(const Config& cfg);
void register_args_op(const ArgsOp& op, const Config& cfg, const std::vector<int64_t>& shape);

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

inline c10::OperatorHandle boxed_op(const std::string& name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "");
}

// ---------------------------------------------------------------------------
// Pre-flight checks.

inline void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
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

// ---------------------------------------------------------------------------
// Registration.

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

}  // namespace dbench::driver
