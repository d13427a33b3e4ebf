// chain: the first k steps of the elementwise chain (kernels/chain.h) fused in one kernel, with its
// backward kernel (ops/csrc/native_op.h says what a declaration holds).
#pragma once

#include <array>
#include <cstdint>

#include "../csrc/native_op.h"
#include "../csrc/op_bodies.h"

namespace dbench::native {

struct chain {
  static constexpr char kName[] = "chain";
  static constexpr char kSignature[] = "(Tensor x, int k) -> Tensor";
  static constexpr char kDoc[] = "the first k steps of the elementwise chain, in one kernel";
  static constexpr std::array<const char*, 2> kArgNames{"x", "k"};
  using Args = native::Args<Tensor, Int>;
  template <class Api>
  static typename Api::Tensor forward(const char* op, const typename Api::Tensor& x, int64_t k) {
    return OpBodies<Api>::chain(op, x, k);
  }
  using Gradient = BackwardOp;
  struct backward {
    static constexpr char kName[] = "chain_backward";
    static constexpr char kSignature[] = "(Tensor grad, Tensor x, int k) -> Tensor";
    static constexpr char kDoc[] = "gradient of chain";
    static constexpr std::array<const char*, 3> kArgNames{"grad", "x", "k"};
    using Args = native::Args<Tensor, Tensor, Int>;
    template <class Api>
    static typename Api::Tensor forward(const char* op, const typename Api::Tensor& grad, const typename Api::Tensor& x,
                                        int64_t k) {
      return OpBodies<Api>::chain_backward(op, grad, x, k);
    }
  };
  static constexpr bool kBoundary = false;  // a kernel-level experiment (the fusion scenario)
};

}  // namespace dbench::native
