// The boundary scenario's cases. For each boundary op (the native declarations with kBoundary:
// ops/native/*.h; inputs (4, 32) float32 like the Python scenario, scalars the declaration's
// kBoundaryScalars) it times one call of:
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
// Each benchmark is first called once and checked: its output against the launcher's, and in
// fwd_bwd its gradients against a float64 central difference of the launcher along a random
// direction (the launcher itself is checked against the fp64 reference by the Python contract
// checks); a mismatch or an exception is reported with SkipWithError ("error_occurred" in the
// JSON) and never timed.
#include <ATen/core/stack.h>
#include <ATen/ops/add.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/randn_like.h>
#include <ATen/ops/sum.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "driver.h"
#include "launchers.h"
#include "native_ops.h"

namespace dbench::driver {
namespace {

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

Tensors make_inputs(size_t n, const Config& cfg, bool requires_grad) {
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(cfg.device);
  Tensors t;
  for (size_t i = 0; i < n; ++i) {
    t.push_back(at::randn({kRows, kCols}, opts).set_requires_grad(requires_grad));
  }
  return t;
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

}  // namespace

void register_boundary_ops(const Config& cfg) {
  dbench::native::for_each(dbench::native::AllOps{}, [&](auto tag) {
    using Op = typename decltype(tag)::type;
    if constexpr (Op::kBoundary) register_op<Op>(cfg);
  });
}

}  // namespace dbench::driver
