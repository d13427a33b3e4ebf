// l2norm: row-wise L2 normalisation, y = x * rsqrt(sum(x * x, last dim) + eps), with its backward
// kernel (ops/csrc/native_op.h says what a declaration holds).
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <utility>

#include "../csrc/native_op.h"
#include "../csrc/op_checks.h"

namespace dbench::native {

struct l2norm {
  static constexpr char kName[] = "l2norm";
  static constexpr char kSignature[] = "(Tensor x, float eps) -> Tensor";
  static constexpr char kDoc[] = "row-wise L2 normalisation";
  static constexpr std::array<const char*, 2> kArgNames{"x", "eps"};
  using Args = native::Args<Tensor, Float>;
  // x as rows x cols, cols being the last dimension.
  template <class Api>
  static std::pair<int64_t, int64_t> rows_cols(const char* op, const typename Api::Tensor& x, double eps) {
    Api::check(eps > 0.0, op, ": eps must be positive, got ", eps);
    Api::check(x.dim() >= 1, op, ": expected a tensor with at least 1 dimension, got a scalar");
    const int64_t cols = x.size(x.dim() - 1);
    return {cols == 0 ? 0 : x.numel() / cols, cols};
  }

  // `index` as noop's; `path` forces the row schedule on CUDA (kernels.h RowPath; the `kernel`
  // variants): a forced warp schedule the rows do not fit is refused on every device, before the launch.
  template <class Api>
  static typename Api::Tensor forward(const char* op, const typename Api::Tensor& x, double eps,
                                      IndexWidth index = IndexWidth::kAuto, RowPath path = RowPath::kAuto) {
    Api::check_inputs(op, {{"x", &x}});
    const auto [rows, cols] = rows_cols<Api>(op, x, eps);
    const auto w = OpChecks<Api>::index_width(op, index, kernels::rowwise_reach(rows, cols), {{"x", &x}});
    const auto xc = Api::contiguous(x);
    auto y = Api::contiguous_output(xc);
    const auto dt = Api::dtype(xc);
    const void* ptrs[2] = {xc.const_data_ptr(), y.mutable_data_ptr()};
    Api::check(kernels::resolve_row_path(path, ptrs, 2, cols, dt) != RowPath::kAuto, op,
               ": path=warp refused: rows of ", cols, " elements need more than ", kernels::kWarpRowPacks,
               " accesses per lane; use path=block or auto");
    Api::launch(
        op, xc, [&] { kernels::l2norm_fwd_cpu(dt, ptrs[0], y.mutable_data_ptr(), rows, cols, eps, w); },
        [&](void* s) { return kernels::l2norm_fwd_cuda(dt, ptrs[0], y.mutable_data_ptr(), rows, cols, eps, s, w, path); });
    return y;
  }
  using KernelKnobs = Knobs<IndexKnob, PathKnob>;
  using Gradient = BackwardOp;
  struct backward {
    static constexpr char kName[] = "l2norm_backward";
    static constexpr char kSignature[] = "(Tensor grad, Tensor x, float eps) -> Tensor";
    static constexpr char kDoc[] = "gradient of l2norm";
    static constexpr std::array<const char*, 3> kArgNames{"grad", "x", "eps"};
    using Args = native::Args<Tensor, Tensor, Float>;
    using KernelKnobs = Knobs<IndexKnob>;
    template <class Api>
    static typename Api::Tensor forward(const char* op, const typename Api::Tensor& grad, const typename Api::Tensor& x,
                                        double eps, IndexWidth index = IndexWidth::kAuto) {
      Api::check_inputs(op, {{"grad", &grad}, {"x", &x}});
      const auto [rows, cols] = rows_cols<Api>(op, x, eps);
      const auto w = OpChecks<Api>::index_width(op, index, kernels::rowwise_reach(rows, cols),
                                                {{"grad", &grad}, {"x", &x}});
      const auto gc = Api::contiguous(grad), xc = Api::contiguous(x);
      auto gx = Api::contiguous_output(xc);
      const auto dt = Api::dtype(xc);
      const void* in[2] = {gc.const_data_ptr(), xc.const_data_ptr()};
      Api::launch(
          op, xc, [&] { kernels::l2norm_bwd_cpu(dt, in[0], in[1], gx.mutable_data_ptr(), rows, cols, eps, w); },
          [&](void* s) {
            return kernels::l2norm_bwd_cuda(dt, in[0], in[1], gx.mutable_data_ptr(), rows, cols, eps, s, w);
          });
      return gx;
    }
  };
  static constexpr bool kBoundary = true;
  static constexpr std::tuple<double> kBoundaryScalars{1e-6};  // ops/catalog.py L2NORM_EPS
};

}  // namespace dbench::native
