// Variants `cpp` and `cpp_autograd`: ops defined with TORCH_LIBRARY whose CPU
// and CUDA kernels are the shared launchers. The `*_autograd` twins add a C++
// Autograd-key kernel (torch::autograd::Function) that redispatches below
// autograd, so fake tensors and compile see the same backend kernels.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/mul.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/library.h>

#include <string>

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

struct L2NormGrad {
  static constexpr const schema::OpSchema& kSchema = schema::kL2Norm;
  using Sig = at::Tensor(const at::Tensor&, double);
  static void save(AutogradContext* ctx, const at::Tensor& x, double eps) {
    ctx->save_for_backward({x});
    ctx->saved_data["eps"] = eps;
  }
  static variable_list backward(AutogradContext* ctx, const at::Tensor& g) {
    // Through the dispatcher, so a traced backward reaches the fake kernel.
    static const auto bwd = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, double)>(
        qualified(schema::kL2NormBackward));
    const auto saved = ctx->get_saved_variables();
    const bool graph_wanted = torch::autograd::GradMode::is_enabled() && (g.requires_grad() || saved[0].requires_grad());
    at::Tensor gx;
    {
      const at::NoGradGuard no_grad;  // l2norm_backward has no derivative: first order only
      gx = bwd.call(g, saved[0], ctx->saved_data["eps"].toDouble());
    }
    if (graph_wanted) {
      // Python's @once_differentiable: differentiating this gradient raises instead of giving zeros.
      gx = torch::autograd::DelayedError(
               "dbench::l2norm_autograd: double backward is not supported (l2norm_backward has no derivative)", 1)
               .apply({gx.detach().requires_grad_(true)})[0];
    }
    return {gx, at::Tensor()};
  }
};

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

// Same backend kernels for CPU and CUDA: the launcher picks the device.
void register_backends(torch::Library& m) {
  for (const char* suffix : {"", schema::kAutogradSuffix}) {
    m.impl((std::string(schema::kNoop.name) + suffix).c_str(), &dbench::noop);
    m.impl((std::string(schema::kMulAdd.name) + suffix).c_str(), &dbench::muladd);
    m.impl((std::string(schema::kL2Norm.name) + suffix).c_str(), &dbench::l2norm);
    m.impl((std::string(schema::kMm.name) + suffix).c_str(), &dbench::mm);
  }
  m.impl(schema::kL2NormBackward.name, &dbench::l2norm_backward);
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
  }
  m.def(def(schema::kL2NormBackward).c_str());
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
}
