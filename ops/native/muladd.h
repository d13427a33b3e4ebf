// muladd: elementwise a * b + c (ops/csrc/native_op.h says what a declaration holds).
#pragma once

#include <array>
#include <tuple>

#include "../csrc/native_op.h"
#include "../csrc/op_checks.h"

namespace dbench::native {

struct muladd {
  static constexpr char kName[] = "muladd";
  static constexpr char kSignature[] = "(Tensor a, Tensor b, Tensor c) -> Tensor";
  static constexpr char kDoc[] = "a * b + c";
  static constexpr std::array<const char*, 3> kArgNames{"a", "b", "c"};
  using Args = native::Args<Tensor, Tensor, Tensor>;
  template <class Api>
  static typename Api::Tensor forward(const char* op, const typename Api::Tensor& a, const typename Api::Tensor& b,
                                      const typename Api::Tensor& c, IndexWidth index = IndexWidth::kAuto) {
    Api::check_inputs(op, {{"a", &a}, {"b", &b}, {"c", &c}});
    const auto w = OpChecks<Api>::index_width(op, index, kernels::elementwise_reach(a.numel()),
                                              {{"a", &a}, {"b", &b}, {"c", &c}});
    const auto ac = Api::contiguous(a), bc = Api::contiguous(b), cc = Api::contiguous(c);
    auto out = Api::contiguous_output(ac);
    const auto dt = Api::dtype(ac);
    const void* in[3] = {ac.const_data_ptr(), bc.const_data_ptr(), cc.const_data_ptr()};
    Api::launch(
        op, ac, [&] { kernels::muladd_cpu(dt, in[0], in[1], in[2], out.mutable_data_ptr(), ac.numel(), w); },
        [&](void* s) { return kernels::muladd_cuda(dt, in[0], in[1], in[2], out.mutable_data_ptr(), ac.numel(), s, w); });
    return out;
  }
  // d/da = grad * b, d/db = grad * a, d/dc = grad: saves a and b, not c.
  using Gradient = Formula;
  using KernelKnobs = Knobs<IndexKnob>;
  static constexpr std::array<bool, 3> kSaved{true, true, false};
  template <class M>
  static std::array<typename M::Tensor, 3> gradient(const M& m, const typename M::Tensor& grad,
                                                    const typename M::Tensor& a, const typename M::Tensor& b) {
    return {m.mul(grad, b), m.mul(grad, a), grad};
  }
  static constexpr bool kBoundary = true;
  static constexpr std::tuple<> kBoundaryScalars{};
};

}  // namespace dbench::native
