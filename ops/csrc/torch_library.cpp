// Variants `cpp` and `cpp_autograd`: every native op (native_ops.h, from ops/native/*.h) defined
// with TORCH_LIBRARY, its CPU and CUDA kernels the op's ATen launcher. The `*_autograd` twins add a
// C++ Autograd-key kernel (torch::autograd::Function), built from the declaration's Gradient, that
// redispatches below autograd, so fake tensors and compile see the same backend kernels.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/mul.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "launchers.h"
#include "native_ops.h"

namespace dbench {
namespace {

using native::ParamOf;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <class Sig>
c10::TypedOperatorHandle<Sig> typed_op(const std::string& name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "").typed<Sig>();
}

template <class Op>
std::string qualified(const char* suffix = "") {
  return std::string(AtenTypes::kNamespace) + "::" + Op::kName + suffix;
}

// The ATen math a Formula gradient is written in (native_op.h).
template <class Op>
struct AtenMath {
  using Tensor = at::Tensor;
  AutogradContext* ctx;
  Tensor mul(const Tensor& a, const Tensor& b) const { return at::mul(a, b); }
  Tensor t(const Tensor& a) const { return a.t(); }
  bool needs_grad(size_t i) const { return ctx->needs_input_grad(i); }
  // The op itself through its autograd twin, so a graph built in backward differentiates it again.
  template <class... A>
  Tensor self(const A&... args) const {
    static const auto op = typed_op<AtenSig<Op>>(qualified<Op>(native::kAutogradSuffix));
    return op.call(args...);
  }
};

// What the Autograd-key kernel saves in forward and how it computes the gradients, per Gradient.
template <class Op, class Kind = typename Op::Gradient, class A = typename Op::Args>
struct Grad;

template <class Op, class A>
struct Grad<Op, native::Identity, A> {
  static_assert(A::kSize == 1 && A::kTensors == 1, "an Identity gradient needs one tensor argument");
  static void save(AutogradContext*, const at::Tensor&) {}
  static variable_list backward(AutogradContext*, const at::Tensor& g) { return {g}; }
};

template <class Op, class A>
struct Grad<Op, native::Formula, A> {
  static_assert(A::kSize == A::kTensors, "a Formula gradient takes tensor arguments only");
  static constexpr size_t count_saved() {
    size_t n = 0;
    for (const bool saved : Op::kSaved) n += saved ? 1 : 0;
    return n;
  }
  static constexpr size_t kSaved = count_saved();

  template <class... T>
  static void save(AutogradContext* ctx, const T&... args) {
    std::vector<at::Tensor> saved;
    saved.reserve(kSaved);
    size_t i = 0;
    ((Op::kSaved[i++] ? saved.push_back(args) : void()), ...);
    ctx->save_for_backward(std::move(saved));
  }
  static variable_list backward(AutogradContext* ctx, const at::Tensor& g) {
    const auto saved = ctx->get_saved_variables();
    return apply(ctx, g, saved, std::make_index_sequence<kSaved>{});
  }
  template <size_t... I>
  static variable_list apply(AutogradContext* ctx, const at::Tensor& g, const variable_list& saved,
                             std::index_sequence<I...>) {
    const auto grads = Op::gradient(AtenMath<Op>{ctx}, g, saved[I]...);
    return variable_list(grads.begin(), grads.end());
  }
};

// One call of the declared backward op on (grad, every argument), through the dispatcher so that a
// traced backward reaches its fake kernel. It returns one gradient per tensor argument and has no
// derivative: first order only, as Python's @once_differentiable.
template <class Op, class... K>
struct Grad<Op, native::BackwardOp, native::Args<K...>> {
  using Bwd = typename Op::backward;
  static constexpr size_t kArgs = sizeof...(K);
  static constexpr std::array<bool, kArgs> kIsTensor{std::is_same_v<K, native::Tensor>...};

  static const std::string& key(size_t i) {  // where scalar argument i is kept
    static const auto keys = [] {
      std::array<std::string, kArgs> k;
      for (size_t j = 0; j < kArgs; ++j) k[j] = "arg" + std::to_string(j);
      return k;
    }();
    return keys[i];
  }
  static void store(AutogradContext*, std::vector<at::Tensor>& tensors, size_t, const at::Tensor& t) {
    tensors.push_back(t);
  }
  template <class S>
  static void store(AutogradContext* ctx, std::vector<at::Tensor>&, size_t i, S scalar) {
    ctx->saved_data[key(i)] = scalar;
  }
  template <class... T>
  static void save(AutogradContext* ctx, const T&... args) {
    std::vector<at::Tensor> tensors;
    tensors.reserve(Op::Args::kTensors);
    size_t i = 0;
    (store(ctx, tensors, i++, args), ...);
    ctx->save_for_backward(std::move(tensors));
  }

  static constexpr size_t ordinal(size_t i) {  // argument i's place among the saved tensors
    size_t n = 0;
    for (size_t j = 0; j < i; ++j) n += kIsTensor[j] ? 1 : 0;
    return n;
  }
  template <size_t I, class Kind>
  static decltype(auto) arg(AutogradContext* ctx, const variable_list& saved) {
    if constexpr (std::is_same_v<Kind, native::Tensor>) {
      return (saved[ordinal(I)]);
    } else if constexpr (std::is_same_v<Kind, native::Float>) {
      return ctx->saved_data[key(I)].toDouble();
    } else {
      return ctx->saved_data[key(I)].toInt();
    }
  }
  template <class Handle, size_t... I>
  static std::vector<at::Tensor> call(const Handle& bwd, AutogradContext* ctx, const at::Tensor& g,
                                      const variable_list& saved, std::index_sequence<I...>) {
    auto out = bwd.call(g, arg<I, K>(ctx, saved)...);
    if constexpr (std::is_same_v<decltype(out), at::Tensor>) {
      return {std::move(out)};
    } else {
      return std::apply([](auto&... t) { return std::vector<at::Tensor>{std::move(t)...}; }, out);
    }
  }

  static variable_list backward(AutogradContext* ctx, const at::Tensor& g) {
    static const auto bwd = typed_op<AtenSig<Bwd>>(qualified<Bwd>());
    const auto saved = ctx->get_saved_variables();
    const bool graph_wanted =
        torch::autograd::GradMode::is_enabled() &&
        (g.requires_grad() || std::any_of(saved.begin(), saved.end(), [](const at::Tensor& t) { return t.requires_grad(); }));
    std::vector<at::Tensor> grads;
    {
      const at::NoGradGuard no_grad;  // the backward kernel has no derivative: first order only
      grads = call(bwd, ctx, g, saved, std::index_sequence_for<K...>{});
    }
    TORCH_CHECK(grads.size() == Op::Args::kTensors, qualified<Bwd>(), " returned ", grads.size(),
                " gradients for ", Op::Args::kTensors, " tensor arguments");
    if (graph_wanted) {
      // Differentiating these gradients raises instead of giving zeros.
      variable_list detached;
      for (const auto& t : grads) detached.push_back(t.detach().requires_grad_(true));
      grads = torch::autograd::DelayedError(qualified<Op>(native::kAutogradSuffix) +
                                                ": double backward is not supported (" + Bwd::kName +
                                                " has no derivative)",
                                            static_cast<int>(detached.size()))
                  .apply(std::move(detached));
    }
    variable_list out;
    size_t t = 0;
    for (const bool is_tensor : kIsTensor) out.push_back(is_tensor ? grads[t++] : at::Tensor());
    return out;
  }
};

template <class Op>
struct AutogradOp : torch::autograd::Function<AutogradOp<Op>> {
  template <class... T>
  static at::Tensor forward(AutogradContext* ctx, const T&... args) {
    static const auto op = typed_op<AtenSig<Op>>(qualified<Op>(native::kAutogradSuffix));
    Grad<Op>::save(ctx, args...);
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(args...);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) { return Grad<Op>::backward(ctx, grads[0]); }
};

// DBENCH_INJECT_CPU_NS / DBENCH_INJECT_GPU_NS (read once, at load): a known extra cost in the
// kernels of the `cpp` variant only (not its `_autograd` twins), so that a regression
// gate's power can be measured against a true effect: a CPU busy-wait before the launch (every
// call, on the host only), and a wait inside the forward CUDA kernel itself. DBENCH_INJECT_NS is
// the CPU wait's older name. Unset, nothing is wrapped.
int64_t env_ns(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? 0 : std::max<int64_t>(0, std::strtoll(v, nullptr, 10));
}
const int64_t kInjectCpuNs =
    std::getenv("DBENCH_INJECT_CPU_NS") != nullptr ? env_ns("DBENCH_INJECT_CPU_NS") : env_ns("DBENCH_INJECT_NS");
const int64_t kInjectGpuNs = env_ns("DBENCH_INJECT_GPU_NS");
bool injecting() { return kInjectCpuNs > 0 || kInjectGpuNs > 0; }

// The op's kernels with their plain parameter types: the ATen launcher, the injected launcher and
// the Autograd-key kernel.
template <class Op, class A = typename Op::Args>
struct Kernels;
template <class Op, class... K>
struct Kernels<Op, native::Args<K...>> {
  static at::Tensor injected(typename ParamOf<AtenTypes, K>::type... args) {
    const auto& first = std::get<0>(std::forward_as_tuple(args...));
    dbench::spin(first, kInjectCpuNs, 0);
    const dbench::InKernelDelay delay(kInjectGpuNs);
    return AtenLauncher<Op>::call(args...);
  }
  static at::Tensor autograd(typename ParamOf<AtenTypes, K>::type... args) { return AutogradOp<Op>::apply(args...); }
};

// The same launcher serves CPU and CUDA: it picks the device.
void register_backends(torch::Library& m) {
  native::for_each(native::AllOps{}, [&](auto tag) {
    using Op = typename decltype(tag)::type;
    // A function pointer (not TORCH_FN), as every registration of the suite's ops has always been.
    m.impl(Op::kName, injecting() ? &Kernels<Op>::injected : &AtenLauncher<Op>::call);
    m.impl((std::string(Op::kName) + native::kAutogradSuffix).c_str(), &AtenLauncher<Op>::call);
    if constexpr (native::kHasBackward<Op>) {
      using Bwd = typename Op::backward;
      m.impl(Bwd::kName, &AtenLauncher<Bwd>::call);
    }
  });
}

}  // namespace
}  // namespace dbench

TORCH_LIBRARY(dbench, m) {
  using namespace dbench;
  native::for_each(native::AllOps{}, [&](auto tag) {
    using Op = typename decltype(tag)::type;
    m.def((std::string(Op::kName) + Op::kSignature).c_str());
    m.def((std::string(Op::kName) + native::kAutogradSuffix + Op::kSignature).c_str());
    if constexpr (native::kHasBackward<Op>) {
      using Bwd = typename Op::backward;
      m.def((std::string(Bwd::kName) + Bwd::kSignature).c_str());
    }
  });
}

TORCH_LIBRARY_IMPL(dbench, CPU, m) { dbench::register_backends(m); }
TORCH_LIBRARY_IMPL(dbench, CUDA, m) { dbench::register_backends(m); }

TORCH_LIBRARY_IMPL(dbench, Autograd, m) {
  using namespace dbench;
  native::for_each(native::AllOps{}, [&](auto tag) {
    using Op = typename decltype(tag)::type;
    m.impl((std::string(Op::kName) + native::kAutogradSuffix).c_str(), &Kernels<Op>::autograd);
  });
}
