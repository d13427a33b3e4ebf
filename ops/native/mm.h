// mm: a @ b, tensor cores for float16/bfloat16 on CUDA (ops/csrc/native_op.h says what a
// declaration holds).
#pragma once

#include <array>
#include <cstdint>

#include "../csrc/native_op.h"
#include "../csrc/op_checks.h"

namespace dbench::native {

struct mm {
  static constexpr char kName[] = "mm";
  static constexpr char kSignature[] = "(Tensor a, Tensor b) -> Tensor";
  static constexpr char kDoc[] = "a @ b (tensor cores for float16/bfloat16 on CUDA)";
  static constexpr std::array<const char*, 2> kArgNames{"a", "b"};
  using Args = native::Args<Tensor, Tensor>;
  // a [M, K] @ b [K, N]: any strides (made contiguous here, like the other ops' inputs).
  template <class Api>
  static typename Api::Tensor forward(const char* op, const typename Api::Tensor& a, const typename Api::Tensor& b) {
    Api::check_inputs(op, {{"a", &a}, {"b", &b}}, kMatmulInputs);
    Api::check(a.dim() == 2, op, ": argument 'a' must be a 2-D tensor, got ", a.dim(), "-D shape ", Api::sizes(a));
    Api::check(b.dim() == 2, op, ": argument 'b' must be a 2-D tensor, got ", b.dim(), "-D shape ", Api::sizes(b));
    Api::check(a.size(1) == b.size(0), op, ": inner dimensions do not match: 'a' is ", Api::sizes(a), ", 'b' is ",
               Api::sizes(b), " (a.size(1) must equal b.size(0))");
    const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
    const auto ac = Api::contiguous(a), bc = Api::contiguous(b);
    auto out = Api::empty_2d(ac, m, n);
    const auto dt = Api::dtype(ac);
    const void* in[2] = {ac.const_data_ptr(), bc.const_data_ptr()};
    Api::launch(
        op, ac, [&] { kernels::mm_cpu(dt, in[0], in[1], out.mutable_data_ptr(), m, k, n); },
        [&](void* s) { return kernels::mm_cuda(dt, in[0], in[1], out.mutable_data_ptr(), m, k, n, s); });
    return out;
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
