// chain: the first k steps of the elementwise chain (kernels/chain.h) fused in one kernel, with its
// backward kernel (ops/csrc/native_op.h says what a declaration holds).
#pragma once

#include <array>
#include <cstdint>

#include "../csrc/native_op.h"
#include "../csrc/op_checks.h"
#include "../kernels/chain.h"

namespace dbench::native {

struct chain {
  static constexpr char kName[] = "chain";
  static constexpr char kSignature[] = "(Tensor x, int k) -> Tensor";
  static constexpr char kDoc[] = "the first k steps of the elementwise chain, in one kernel";
  static constexpr std::array<const char*, 2> kArgNames{"x", "k"};
  using Args = native::Args<Tensor, Int>;
  template <class Api>
  static void check_steps(const char* op, int64_t k, int64_t first) {
    Api::check(k >= 1 && k <= kernels::chain::kMaxLength, op, ": k must be between 1 and ",
               kernels::chain::kMaxLength, ", got ", k);
    Api::check(first == 0 || (first > 0 && k == 1), op, ": a chain starts at step 0, or is one step (k = 1) from step ",
               first);
  }

  // Steps first .. first + k - 1 in one launch. The op is first = 0; `first` > 0 (one step) is how
  // the unfused chain launches step by step. `index` as noop's.
  template <class Api>
  static typename Api::Tensor forward(const char* op, const typename Api::Tensor& x, int64_t k, int64_t first = 0,
                                      IndexWidth index = IndexWidth::kAuto) {
    Api::check_inputs(op, {{"x", &x}});
    check_steps<Api>(op, k, first);
    const auto w = OpChecks<Api>::index_width(op, index, kernels::elementwise_reach(x.numel()), {{"x", &x}});
    const auto xc = Api::contiguous(x);
    auto out = Api::contiguous_output(xc);
    const auto dt = Api::dtype(xc);
    const int f = static_cast<int>(first), n_steps = static_cast<int>(k);
    Api::launch(
        op, xc, [&] { kernels::chain_cpu(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel(), f, n_steps, w); },
        [&](void* s) {
          return kernels::chain_cuda(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel(), f, n_steps, s, w);
        });
    return out;
  }
  using KernelKnobs = Knobs<FirstKnob, IndexKnob>;
  using Gradient = BackwardOp;
  struct backward {
    static constexpr char kName[] = "chain_backward";
    static constexpr char kSignature[] = "(Tensor grad, Tensor x, int k) -> Tensor";
    static constexpr char kDoc[] = "gradient of chain";
    static constexpr std::array<const char*, 3> kArgNames{"grad", "x", "k"};
    using Args = native::Args<Tensor, Tensor, Int>;
    using KernelKnobs = Knobs<IndexKnob>;
    template <class Api>
    static typename Api::Tensor forward(const char* op, const typename Api::Tensor& grad, const typename Api::Tensor& x,
                                        int64_t k, IndexWidth index = IndexWidth::kAuto) {
      Api::check_inputs(op, {{"grad", &grad}, {"x", &x}});
      check_steps<Api>(op, k, 0);
      const auto w = OpChecks<Api>::index_width(op, index, kernels::elementwise_reach(x.numel()),
                                                {{"grad", &grad}, {"x", &x}});
      const auto gc = Api::contiguous(grad), xc = Api::contiguous(x);
      auto gx = Api::contiguous_output(xc);
      const auto dt = Api::dtype(xc);
      const void* in[2] = {gc.const_data_ptr(), xc.const_data_ptr()};
      const int n_steps = static_cast<int>(k);
      Api::launch(
          op, xc, [&] { kernels::chain_bwd_cpu(dt, in[0], in[1], gx.mutable_data_ptr(), xc.numel(), n_steps, w); },
          [&](void* s) {
            return kernels::chain_bwd_cuda(dt, in[0], in[1], gx.mutable_data_ptr(), xc.numel(), n_steps, s, w);
          });
      return gx;
    }
  };
  static constexpr bool kBoundary = false;  // a kernel-level experiment (the fusion scenario)
};

}  // namespace dbench::native
