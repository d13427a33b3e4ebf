// noop: allocate the output and copy the input, the pure boundary cost (ops/csrc/native_op.h says
// what a declaration holds and where each field is used).
#pragma once

#include <array>
#include <tuple>

#include "../csrc/native_op.h"
#include "../csrc/op_checks.h"

namespace dbench::native {

struct noop {
  static constexpr char kName[] = "noop";
  static constexpr char kSignature[] = "(Tensor x) -> Tensor";
  static constexpr char kDoc[] = "identity copy";
  static constexpr std::array<const char*, 1> kArgNames{"x"};
  using Args = native::Args<Tensor>;
  // `index`: the offset width, kAuto or a forced int32 / int64 (the offsets scenario's kernel
  // variants), checked before any copy or allocation; every elementwise and row-wise body takes it.
  template <class Api>
  static typename Api::Tensor forward(const char* op, const typename Api::Tensor& x,
                                      IndexWidth index = IndexWidth::kAuto) {
    Api::check_inputs(op, {{"x", &x}});
    const auto w = OpChecks<Api>::index_width(op, index, kernels::elementwise_reach(x.numel()), {{"x", &x}});
    const auto xc = Api::contiguous(x);
    auto out = Api::contiguous_output(xc);
    const auto dt = Api::dtype(xc);
    Api::launch(
        op, xc, [&] { kernels::noop_cpu(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel(), w); },
        [&](void* s) { return kernels::noop_cuda(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel(), s, w); });
    return out;
  }
  using Gradient = Identity;
  using KernelKnobs = Knobs<IndexKnob>;
  static constexpr bool kBoundary = true;
  static constexpr std::tuple<> kBoundaryScalars{};
};

}  // namespace dbench::native
