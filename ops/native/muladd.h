// muladd: elementwise a * b + c (ops/csrc/native_op.h says what a declaration holds).
#pragma once

#include <array>
#include <tuple>

#include "../csrc/native_op.h"
#include "../csrc/op_bodies.h"

namespace dbench::native {

struct muladd {
  static constexpr char kName[] = "muladd";
  static constexpr char kSignature[] = "(Tensor a, Tensor b, Tensor c) -> Tensor";
  static constexpr char kDoc[] = "a * b + c";
  static constexpr std::array<const char*, 3> kArgNames{"a", "b", "c"};
  using Args = native::Args<Tensor, Tensor, Tensor>;
  template <class Api>
  static typename Api::Tensor forward(const char* op, const typename Api::Tensor& a, const typename Api::Tensor& b,
                                      const typename Api::Tensor& c) {
    return OpBodies<Api>::muladd(op, a, b, c);
  }
  // d/da = grad * b, d/db = grad * a, d/dc = grad: saves a and b, not c.
  using Gradient = Formula;
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
