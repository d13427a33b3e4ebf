// l2norm: row-wise L2 normalisation, y = x * rsqrt(sum(x * x, last dim) + eps), with its backward
// kernel (ops/csrc/native_op.h says what a declaration holds).
#pragma once

#include <array>
#include <tuple>

#include "../csrc/native_op.h"
#include "../csrc/op_bodies.h"

namespace dbench::native {

struct l2norm {
  static constexpr char kName[] = "l2norm";
  static constexpr char kSignature[] = "(Tensor x, float eps) -> Tensor";
  static constexpr char kDoc[] = "row-wise L2 normalisation";
  static constexpr std::array<const char*, 2> kArgNames{"x", "eps"};
  using Args = native::Args<Tensor, Float>;
  template <class Api>
  static typename Api::Tensor forward(const char* op, const typename Api::Tensor& x, double eps) {
    return OpBodies<Api>::l2norm(op, x, eps);
  }
  using Gradient = BackwardOp;
  struct backward {
    static constexpr char kName[] = "l2norm_backward";
    static constexpr char kSignature[] = "(Tensor grad, Tensor x, float eps) -> Tensor";
    static constexpr char kDoc[] = "gradient of l2norm";
    static constexpr std::array<const char*, 3> kArgNames{"grad", "x", "eps"};
    using Args = native::Args<Tensor, Tensor, Float>;
    template <class Api>
    static typename Api::Tensor forward(const char* op, const typename Api::Tensor& grad, const typename Api::Tensor& x,
                                        double eps) {
      return OpBodies<Api>::l2norm_backward(op, grad, x, eps);
    }
  };
  static constexpr bool kBoundary = true;
  static constexpr std::tuple<double> kBoundaryScalars{1e-6};  // ops/catalog.py L2NORM_EPS
};

}  // namespace dbench::native
