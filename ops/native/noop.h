// noop: allocate the output and copy the input, the pure boundary cost (ops/csrc/native_op.h says
// what a declaration holds and where each field is used).
#pragma once

#include <array>
#include <tuple>

#include "../csrc/native_op.h"
#include "../csrc/op_bodies.h"

namespace dbench::native {

struct noop {
  static constexpr char kName[] = "noop";
  static constexpr char kSignature[] = "(Tensor x) -> Tensor";
  static constexpr char kDoc[] = "identity copy";
  static constexpr std::array<const char*, 1> kArgNames{"x"};
  using Args = native::Args<Tensor>;
  template <class Api>
  static typename Api::Tensor forward(const char* op, const typename Api::Tensor& x) {
    return OpBodies<Api>::noop(op, x);
  }
  using Gradient = Identity;
  static constexpr bool kBoundary = true;
  static constexpr std::tuple<> kBoundaryScalars{};
};

}  // namespace dbench::native
