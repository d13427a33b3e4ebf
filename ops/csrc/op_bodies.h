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
#include <utility>

#include "../kernels/kernels.h"
#include "message.h"

namespace dbench {

// What check_inputs demands beyond the shared contract (defined, strided, CPU or CUDA,
// one device, one dtype). The elementwise and row-wise ops take float32/float64 tensors
// of one shape; mm also takes float16/bfloat16 and checks its shapes itself.
struct InputRule {
  bool same_shape = true;
  bool half_types = false;
};

inline constexpr InputRule kMatmulInputs{false, true};

inline const char* expected_dtypes(InputRule rule) {
  return rule.half_types ? "expected float16, bfloat16, float32 or float64" : "expected float32 or float64";
}

template <class Api>
struct OpBodies {
  using Tensor = typename Api::Tensor;

  static Tensor noop(const char* op, const Tensor& x) {
    Api::check_inputs(op, {{"x", &x}});
    const Tensor xc = Api::contiguous(x);
    Tensor out = Api::contiguous_output(xc);
    const auto dt = Api::dtype(xc);
    Api::launch(
        op, xc, [&] { kernels::noop_cpu(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel()); },
        [&](void* s) { return kernels::noop_cuda(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel(), s); });
    return out;
  }

  static Tensor muladd(const char* op, const Tensor& a, const Tensor& b, const Tensor& c) {
    Api::check_inputs(op, {{"a", &a}, {"b", &b}, {"c", &c}});
    const Tensor ac = Api::contiguous(a), bc = Api::contiguous(b), cc = Api::contiguous(c);
    Tensor out = Api::contiguous_output(ac);
    const auto dt = Api::dtype(ac);
    const void* in[3] = {ac.const_data_ptr(), bc.const_data_ptr(), cc.const_data_ptr()};
    Api::launch(
        op, ac, [&] { kernels::muladd_cpu(dt, in[0], in[1], in[2], out.mutable_data_ptr(), ac.numel()); },
        [&](void* s) { return kernels::muladd_cuda(dt, in[0], in[1], in[2], out.mutable_data_ptr(), ac.numel(), s); });
    return out;
  }

  static Tensor l2norm(const char* op, const Tensor& x, double eps) {
    Api::check_inputs(op, {{"x", &x}});
    const auto [rows, cols] = rows_cols(op, x, eps);
    const Tensor xc = Api::contiguous(x);
    Tensor y = Api::contiguous_output(xc);
    const auto dt = Api::dtype(xc);
    Api::launch(
        op, xc, [&] { kernels::l2norm_fwd_cpu(dt, xc.const_data_ptr(), y.mutable_data_ptr(), rows, cols, eps); },
        [&](void* s) {
          return kernels::l2norm_fwd_cuda(dt, xc.const_data_ptr(), y.mutable_data_ptr(), rows, cols, eps, s);
        });
    return y;
  }

  static Tensor l2norm_backward(const char* op, const Tensor& grad, const Tensor& x, double eps) {
    Api::check_inputs(op, {{"grad", &grad}, {"x", &x}});
    const auto [rows, cols] = rows_cols(op, x, eps);
    const Tensor gc = Api::contiguous(grad), xc = Api::contiguous(x);
    Tensor gx = Api::contiguous_output(xc);
    const auto dt = Api::dtype(xc);
    const void* in[2] = {gc.const_data_ptr(), xc.const_data_ptr()};
    Api::launch(
        op, xc, [&] { kernels::l2norm_bwd_cpu(dt, in[0], in[1], gx.mutable_data_ptr(), rows, cols, eps); },
        [&](void* s) { return kernels::l2norm_bwd_cuda(dt, in[0], in[1], gx.mutable_data_ptr(), rows, cols, eps, s); });
    return gx;
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
  // Row-wise ops see a tensor as rows x cols, cols being the last dimension.
  static std::pair<int64_t, int64_t> rows_cols(const char* op, const Tensor& x, double eps) {
    Api::check(eps > 0.0, op, ": eps must be positive, got ", eps);
    Api::check(x.dim() >= 1, op, ": expected a tensor with at least 1 dimension, got a scalar");
    const int64_t cols = x.size(x.dim() - 1);
    return {cols == 0 ? 0 : x.numel() / cols, cols};
  }
};

}  // namespace dbench
