// mm: a @ b, tensor cores for float16/bfloat16 on CUDA (ops/csrc/native_op.h says what a
// declaration holds).
#pragma once

#include <array>

#include "../csrc/native_op.h"
#include "../csrc/op_bodies.h"

namespace dbench::native {

struct mm {
  static constexpr char kName[] = "mm";
  static constexpr char kSignature[] = "(Tensor a, Tensor b) -> Tensor";
  static constexpr char kDoc[] = "a @ b (tensor cores for float16/bfloat16 on CUDA)";
  static constexpr std::array<const char*, 2> kArgNames{"a", "b"};
  using Args = native::Args<Tensor, Tensor>;
  template <class Api>
  static typename Api::Tensor forward(const char* op, const typename Api::Tensor& a, const typename Api::Tensor& b) {
    return OpBodies<Api>::mm(op, a, b);
  }
  // grad_a = g @ b^T, grad_b = a^T @ g, each one call of the op's autograd twin (m.self), so that a
  // graph built in backward (create_graph) differentiates them again; a gradient not needed is skipped.
  using Gradient = Formula;
  static constexpr std::array<bool, 2> kSaved{true, true};
  template <class M>
  static std::array<typename M::Tensor, 2> gradient(const M& m, const typename M::Tensor& grad,
                                                    const typename M::Tensor& a, const typename M::Tensor& b) {
    return {m.needs_grad(0) ? m.self(grad, m.t(b)) : typename M::Tensor(),
            m.needs_grad(1) ? m.self(m.t(a), grad) : typename M::Tensor()};
  }
  static constexpr bool kBoundary = false;  // the compute-bound end: time it with --ops mm
};

}  // namespace dbench::native
