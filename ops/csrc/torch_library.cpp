// Variants `cpp` and `cpp_autograd`: ops defined with TORCH_LIBRARY whose CPU
// and CUDA kernels are the shared launchers. The `*_autograd` twins add a C++
// Autograd-key kernel (torch::autograd::Function) that redispatches below
// autograd, so fake tensors and compile see the same backend kernels.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/mul.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <tuple>

#include "launchers.h"
#include "schemas.h"

namespace dbench {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <class Sig>
c10::TypedOperatorHandle<Sig> typed_op(const std::string& name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "").typed<Sig>();
}

std::string qualified(const schema::OpSchema& s, const char* suffix = "") {
  return std::string("dbench::") + s.name + suffix;
}

// Per-op autograd policy: what to save and the backward formula.
struct NoopGrad {
  static constexpr const schema::OpSchema& kSchema = schema::kNoop;
  using Sig = at::Tensor(const at::Tensor&);
  static void save(AutogradContext*, const at::Tensor&) {}
  static variable_list backward(AutogradContext*, const at::Tensor& g) { return {g}; }
};

struct MulAddGrad {
  static constexpr const schema::OpSchema& kSchema = schema::kMulAdd;
  using Sig = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&);
  static void save(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b, const at::Tensor&) {
    ctx->save_for_backward({a, b});
  }
  static variable_list backward(AutogradContext* ctx, const at::Tensor& g) {
    const auto saved = ctx->get_saved_variables();
    return {at::mul(g, saved[1]), at::mul(g, saved[0]), g};
  }
};

// Ops whose gradient is one call of a backward kernel without a derivative of its own
// (l2norm, chain): save x and the scalar argument, call the kernel, first order only.
template <const schema::OpSchema& Fwd, const schema::OpSchema& Bwd, class Scalar>
struct FirstOrderGrad {
  static constexpr const schema::OpSchema& kSchema = Fwd;
  using Sig = at::Tensor(const at::Tensor&, Scalar);
  static void save(AutogradContext* ctx, const at::Tensor& x, Scalar s) {
    ctx->save_for_backward({x});
    ctx->saved_data["scalar"] = s;
  }
  static variable_list backward(AutogradContext* ctx, const at::Tensor& g) {
    // Through the dispatcher, so a traced backward reaches the fake kernel.
    static const auto bwd = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, Scalar)>(qualified(Bwd));
    const auto saved = ctx->get_saved_variables();
    const bool graph_wanted = torch::autograd::GradMode::is_enabled() && (g.requires_grad() || saved[0].requires_grad());
    at::Tensor gx;
    {
      const at::NoGradGuard no_grad;  // the backward kernel has no derivative: first order only
      gx = bwd.call(g, saved[0], ctx->saved_data["scalar"].to<Scalar>());
    }
    if (graph_wanted) {
      // Python's @once_differentiable: differentiating this gradient raises instead of giving zeros.
      gx = torch::autograd::DelayedError(std::string("dbench::") + Fwd.name + schema::kAutogradSuffix +
                                             ": double backward is not supported (" + Bwd.name +
                                             " has no derivative)",
                                         1)
               .apply({gx.detach().requires_grad_(true)})[0];
    }
    return {gx, at::Tensor()};
  }
};

using L2NormGrad = FirstOrderGrad<schema::kL2Norm, schema::kL2NormBackward, double>;
using ChainGrad = FirstOrderGrad<schema::kChain, schema::kChainBackward, int64_t>;

struct MmGrad {
  static constexpr const schema::OpSchema& kSchema = schema::kMm;
  using Sig = at::Tensor(const at::Tensor&, const at::Tensor&);
  static void save(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) { ctx->save_for_backward({a, b}); }
  // grad_a = g @ b^T, grad_b = a^T @ g, with the op itself: through its autograd twin,
  // so that a graph built in backward (create_graph) differentiates them again.
  static variable_list backward(AutogradContext* ctx, const at::Tensor& g) {
    static const auto op = typed_op<Sig>(qualified(schema::kMm, schema::kAutogradSuffix));
    const auto saved = ctx->get_saved_variables();
    return {ctx->needs_input_grad(0) ? op.call(g, saved[1].t()) : at::Tensor(),
            ctx->needs_input_grad(1) ? op.call(saved[0].t(), g) : at::Tensor()};
  }
};

template <class Grad>
struct AutogradOp : torch::autograd::Function<AutogradOp<Grad>> {
  template <class... Args>
  static at::Tensor forward(AutogradContext* ctx, const Args&... args) {
    static const auto op = typed_op<typename Grad::Sig>(qualified(Grad::kSchema, schema::kAutogradSuffix));
    Grad::save(ctx, args...);
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(args...);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return Grad::backward(ctx, grads[0]);
  }
};

template <class Grad, class... Args>
at::Tensor autograd_kernel(Args... args) {
  return AutogradOp<Grad>::apply(args...);
}

std::string def(const schema::OpSchema& s, const char* suffix = "") {
  return std::string(s.name) + suffix + s.signature;
}

// DBENCH_INJECT_NS / DBENCH_INJECT_GPU_NS (read once, at load): a known extra cost in the
// kernels of the `cpp` variant only (not its `_autograd` twins), so that a regression
// gate's power can be measured against a true effect: a CPU busy-wait before the launch,
// and a wait inside the forward CUDA kernel itself. Unset, nothing is wrapped.
int64_t env_ns(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? 0 : std::max<int64_t>(0, std::strtoll(v, nullptr, 10));
}
const int64_t kInjectCpuNs = env_ns("DBENCH_INJECT_NS");
const int64_t kInjectGpuNs = env_ns("DBENCH_INJECT_GPU_NS");
bool injecting() { return kInjectCpuNs > 0 || kInjectGpuNs > 0; }

template <auto Fn, class... Args>
at::Tensor injected(Args... args) {
  const auto& first = std::get<0>(std::forward_as_tuple(args...));
  dbench::spin(first, kInjectCpuNs, 0);
  const dbench::InKernelDelay delay(kInjectGpuNs);
  return Fn(args...);
}

template <auto Fn, class... Args>
void impl(torch::Library& m, const std::string& name, bool inject, at::Tensor (*)(Args...)) {
  if (inject) {
    m.impl(name.c_str(), &injected<Fn, Args...>);
  } else {
    m.impl(name.c_str(), Fn);
  }
}

// Same backend kernels for CPU and CUDA: the launcher picks the device.
void register_backends(torch::Library& m) {
  for (const char* suffix : {"", schema::kAutogradSuffix}) {
    const bool inject = injecting() && std::string(suffix).empty();
    const auto name = [&](const schema::OpSchema& s) { return std::string(s.name) + suffix; };
    impl<&dbench::noop>(m, name(schema::kNoop), inject, &dbench::noop);
    impl<&dbench::muladd>(m, name(schema::kMulAdd), inject, &dbench::muladd);
    impl<&dbench::l2norm>(m, name(schema::kL2Norm), inject, &dbench::l2norm);
    impl<&dbench::mm>(m, name(schema::kMm), inject, &dbench::mm);
    impl<&dbench::chain>(m, name(schema::kChain), inject, &dbench::chain);
  }
  m.impl(schema::kL2NormBackward.name, &dbench::l2norm_backward);
  m.impl(schema::kChainBackward.name, &dbench::chain_backward);
}

}  // namespace
}  // namespace dbench

TORCH_LIBRARY(dbench, m) {
  using namespace dbench;
  for (const char* suffix : {"", schema::kAutogradSuffix}) {
    m.def(def(schema::kNoop, suffix).c_str());
    m.def(def(schema::kMulAdd, suffix).c_str());
    m.def(def(schema::kL2Norm, suffix).c_str());
    m.def(def(schema::kMm, suffix).c_str());
    m.def(def(schema::kChain, suffix).c_str());
  }
  m.def(def(schema::kL2NormBackward).c_str());
  m.def(def(schema::kChainBackward).c_str());
}

TORCH_LIBRARY_IMPL(dbench, CPU, m) { dbench::register_backends(m); }
TORCH_LIBRARY_IMPL(dbench, CUDA, m) { dbench::register_backends(m); }

TORCH_LIBRARY_IMPL(dbench, Autograd, m) {
  using namespace dbench;
  const std::string sfx = schema::kAutogradSuffix;
  m.impl((schema::kNoop.name + sfx).c_str(), &autograd_kernel<NoopGrad, const at::Tensor&>);
  m.impl((schema::kMulAdd.name + sfx).c_str(),
         &autograd_kernel<MulAddGrad, const at::Tensor&, const at::Tensor&, const at::Tensor&>);
  m.impl((schema::kL2Norm.name + sfx).c_str(), &autograd_kernel<L2NormGrad, const at::Tensor&, double>);
  m.impl((schema::kMm.name + sfx).c_str(), &autograd_kernel<MmGrad, const at::Tensor&, const at::Tensor&>);
  m.impl((schema::kChain.name + sfx).c_str(), &autograd_kernel<ChainGrad, const at::Tensor&, int64_t>);
}
