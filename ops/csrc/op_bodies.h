// The body of every op, written once for both tensor APIs it is compiled
// against: ATen (launchers.cpp: the raw and TORCH_LIBRARY variants) and the
// LibTorch stable ABI (stable_library.cpp). An Api supplies the tensor type and
// the few operations that differ between the two:
//
//   using Tensor;
//   static void check_inputs(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>>,
//                            InputRule rule = {});
//   template <class... M> static void check(bool ok, const M&... message);
//   static msg::Sizes sizes(const Tensor&);
//   static Tensor contiguous(const Tensor&);
//   static Tensor contiguous_output(const Tensor& like);   // same shape, dtype, device; contiguous
//   static Tensor empty_2d(const Tensor& like, int64_t rows, int64_t cols);  // like's dtype and device
//   static kernels::DType dtype(const Tensor&);
//   template <class Cpu, class Cuda> static void launch(const char* op, const Tensor& like, Cpu&&, Cuda&&);
//
// launch runs the CPU lambda, or the CUDA lambda with the device's current
// stream under a device guard.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "../kernels/chain.h"
#include "../kernels/kernels.h"
#include "message.h"

namespace dbench {

// What check_inputs demands beyond the shared contract (defined, strided, CPU or CUDA,
// one device, one of the four floating dtypes, one dtype): the elementwise and row-wise
// ops take tensors of one shape; mm checks its shapes itself.
struct InputRule {
  bool same_shape = true;
};

inline constexpr InputRule kMatmulInputs{false};

// Every op takes these (ops/contract.py SUPPORTED_DTYPES words them the same).
inline constexpr const char* kExpectedDtypes = "expected float16, bfloat16, float32 or float64";

using kernels::IndexWidth;
using kernels::RowPath;

template <class Api>
struct OpBodies {
  using Tensor = typename Api::Tensor;
  using NamedTensor = std::pair<const char*, const Tensor*>;

  // Every elementwise and row-wise body takes the offset width (`index`): kAuto, or a forced
  // int32 / int64 (the `offsets` scenario). index_width checks it before any copy or allocation.
  static Tensor noop(const char* op, const Tensor& x, IndexWidth index = IndexWidth::kAuto) {
    Api::check_inputs(op, {{"x", &x}});
    const auto w = index_width(op, index, kernels::elementwise_reach(x.numel()), {{"x", &x}});
    const Tensor xc = Api::contiguous(x);
    Tensor out = Api::contiguous_output(xc);
    const auto dt = Api::dtype(xc);
    Api::launch(
        op, xc, [&] { kernels::noop_cpu(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel(), w); },
        [&](void* s) { return kernels::noop_cuda(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel(), s, w); });
    return out;
  }

  static Tensor muladd(const char* op, const Tensor& a, const Tensor& b, const Tensor& c,
                       IndexWidth index = IndexWidth::kAuto) {
    Api::check_inputs(op, {{"a", &a}, {"b", &b}, {"c", &c}});
    const auto w = index_width(op, index, kernels::elementwise_reach(a.numel()), {{"a", &a}, {"b", &b}, {"c", &c}});
    const Tensor ac = Api::contiguous(a), bc = Api::contiguous(b), cc = Api::contiguous(c);
    Tensor out = Api::contiguous_output(ac);
    const auto dt = Api::dtype(ac);
    const void* in[3] = {ac.const_data_ptr(), bc.const_data_ptr(), cc.const_data_ptr()};
    Api::launch(
        op, ac, [&] { kernels::muladd_cpu(dt, in[0], in[1], in[2], out.mutable_data_ptr(), ac.numel(), w); },
        [&](void* s) { return kernels::muladd_cuda(dt, in[0], in[1], in[2], out.mutable_data_ptr(), ac.numel(), s, w); });
    return out;
  }

  // `path` forces l2norm's row schedule on CUDA (kernels.h RowPath; the `kernel` variants); a
  // forced warp schedule the rows do not fit is refused on every device, before the launch.
  static Tensor l2norm(const char* op, const Tensor& x, double eps, IndexWidth index = IndexWidth::kAuto,
                       RowPath path = RowPath::kAuto) {
    Api::check_inputs(op, {{"x", &x}});
    const auto [rows, cols] = rows_cols(op, x, eps);
    const auto w = index_width(op, index, kernels::rowwise_reach(rows, cols), {{"x", &x}});
    const Tensor xc = Api::contiguous(x);
    Tensor y = Api::contiguous_output(xc);
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

  static Tensor l2norm_backward(const char* op, const Tensor& grad, const Tensor& x, double eps,
                                IndexWidth index = IndexWidth::kAuto) {
    Api::check_inputs(op, {{"grad", &grad}, {"x", &x}});
    const auto [rows, cols] = rows_cols(op, x, eps);
    const auto w = index_width(op, index, kernels::rowwise_reach(rows, cols), {{"grad", &grad}, {"x", &x}});
    const Tensor gc = Api::contiguous(grad), xc = Api::contiguous(x);
    Tensor gx = Api::contiguous_output(xc);
    const auto dt = Api::dtype(xc);
    const void* in[2] = {gc.const_data_ptr(), xc.const_data_ptr()};
    Api::launch(
        op, xc, [&] { kernels::l2norm_bwd_cpu(dt, in[0], in[1], gx.mutable_data_ptr(), rows, cols, eps, w); },
        [&](void* s) { return kernels::l2norm_bwd_cuda(dt, in[0], in[1], gx.mutable_data_ptr(), rows, cols, eps, s, w); });
    return gx;
  }

  // The chain (kernels/chain.h): steps first .. first + k - 1 in one launch. The op is
  // first = 0; `first` > 0 (one step) is how the unfused chain launches step by step.
  static Tensor chain(const char* op, const Tensor& x, int64_t k, int64_t first = 0,
                      IndexWidth index = IndexWidth::kAuto) {
    Api::check_inputs(op, {{"x", &x}});
    check_chain(op, k, first);
    const auto w = index_width(op, index, kernels::elementwise_reach(x.numel()), {{"x", &x}});
    const Tensor xc = Api::contiguous(x);
    Tensor out = Api::contiguous_output(xc);
    const auto dt = Api::dtype(xc);
    const int f = static_cast<int>(first), n_steps = static_cast<int>(k);
    Api::launch(
        op, xc, [&] { kernels::chain_cpu(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel(), f, n_steps, w); },
        [&](void* s) {
          return kernels::chain_cuda(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel(), f, n_steps, s, w);
        });
    return out;
  }

  static Tensor chain_backward(const char* op, const Tensor& grad, const Tensor& x, int64_t k,
                               IndexWidth index = IndexWidth::kAuto) {
    Api::check_inputs(op, {{"grad", &grad}, {"x", &x}});
    check_chain(op, k, 0);
    const auto w = index_width(op, index, kernels::elementwise_reach(x.numel()), {{"grad", &grad}, {"x", &x}});
    const Tensor gc = Api::contiguous(grad), xc = Api::contiguous(x);
    Tensor gx = Api::contiguous_output(xc);
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

  // The offset width a launch uses: the forced one, or (kAuto) int32 when every argument's
  // view (sizes, strides, storage offset: kernels::view_fits_int32) and the kernel's own
  // loops fit. A forced int32 that does not fit is refused, naming what does not fit.
  static IndexWidth index_width(const char* op, IndexWidth requested, int64_t kernel_reach,
                                std::initializer_list<NamedTensor> args) {
    const char* wide = nullptr;
    for (const auto& [name, t] : args) {
      if (!view_fits(*t)) {
        wide = name;
        break;
      }
    }
    const IndexWidth w = kernels::resolve_index(requested, wide == nullptr, kernel_reach);
    if (w == IndexWidth::kAuto) {
      if (wide != nullptr) {
        Api::check(false, op, ": index=int32 refused: argument '", wide,
                   "' has a size, a stride or a reachable offset past INT32_MAX; use index=int64 or auto");
      }
      Api::check(false, op, ": index=int32 refused: the kernel's offsets reach ", kernel_reach,
                 " > INT32_MAX; use index=int64 or auto");
    }
    return w;
  }

  static bool view_fits(const Tensor& t) {
    return kernels::view_fits_int32(t.sizes().data(), t.strides().data(), static_cast<int>(t.dim()), t.storage_offset());
  }

  // a [M, K] @ b [K, N]: any strides (made contiguous here, like the other ops' inputs).
  static Tensor mm(const char* op, const Tensor& a, const Tensor& b) {
    Api::check_inputs(op, {{"a", &a}, {"b", &b}}, kMatmulInputs);
    Api::check(a.dim() == 2, op, ": argument 'a' must be a 2-D tensor, got ", a.dim(), "-D shape ", Api::sizes(a));
    Api::check(b.dim() == 2, op, ": argument 'b' must be a 2-D tensor, got ", b.dim(), "-D shape ", Api::sizes(b));
    Api::check(a.size(1) == b.size(0), op, ": inner dimensions do not match: 'a' is ", Api::sizes(a), ", 'b' is ",
               Api::sizes(b), " (a.size(1) must equal b.size(0))");
    const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
    const Tensor ac = Api::contiguous(a), bc = Api::contiguous(b);
    Tensor out = Api::empty_2d(ac, m, n);
    const auto dt = Api::dtype(ac);
    const void* in[2] = {ac.const_data_ptr(), bc.const_data_ptr()};
    Api::launch(
        op, ac, [&] { kernels::mm_cpu(dt, in[0], in[1], out.mutable_data_ptr(), m, k, n); },
        [&](void* s) { return kernels::mm_cuda(dt, in[0], in[1], out.mutable_data_ptr(), m, k, n, s); });
    return out;
  }

 private:
  static void check_chain(const char* op, int64_t k, int64_t first) {
    Api::check(k >= 1 && k <= kernels::chain::kMaxLength, op, ": k must be between 1 and ",
               kernels::chain::kMaxLength, ", got ", k);
    Api::check(first == 0 || (first > 0 && k == 1), op, ": a chain starts at step 0, or is one step (k = 1) from step ",
               first);
  }

  // Row-wise ops see a tensor as rows x cols, cols being the last dimension.
  static std::pair<int64_t, int64_t> rows_cols(const char* op, const Tensor& x, double eps) {
    Api::check(eps > 0.0, op, ": eps must be positive, got ", eps);
    Api::check(x.dim() >= 1, op, ": expected a tensor with at least 1 dimension, got a scalar");
    const int64_t cols = x.size(x.dim() - 1);
    return {cols == 0 ? 0 : x.numel() / cols, cols};
  }
};

}  // namespace dbench
