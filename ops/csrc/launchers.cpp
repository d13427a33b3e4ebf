#include "launchers.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <initializer_list>
#include <optional>
#include <utility>

#include "../kernels/kernels.h"

namespace dbench {
namespace {

namespace k = kernels;

using NamedTensor = std::pair<const char*, const at::Tensor*>;

// Input contract shared by every op; messages name the op and the argument.
void check_inputs(const char* op, std::initializer_list<NamedTensor> args) {
  const auto& [first_name, first] = *args.begin();
  for (const auto& [name, t] : args) {
    TORCH_CHECK(t->defined(), op, ": argument '", name, "' is undefined");
    TORCH_CHECK(t->layout() == at::kStrided, op, ": argument '", name,
                "' has unsupported layout ", t->layout(), " (only strided tensors are supported)");
    TORCH_CHECK(t->scalar_type() == at::kFloat || t->scalar_type() == at::kDouble, op,
                ": argument '", name, "' has unsupported dtype ", t->scalar_type(),
                " (expected float32 or float64)");
    TORCH_CHECK(t->device().is_cpu() || t->device().is_cuda(), op, ": argument '", name,
                "' is on unsupported device ", t->device());
    TORCH_CHECK(t->device() == first->device(), op, ": arguments '", first_name, "' and '", name,
                "' are on different devices (", first->device(), " vs ", t->device(), ")");
    TORCH_CHECK(t->scalar_type() == first->scalar_type(), op, ": arguments '", first_name,
                "' and '", name, "' have different dtypes (", first->scalar_type(), " vs ",
                t->scalar_type(), ")");
    TORCH_CHECK(t->sizes() == first->sizes(), op, ": arguments '", first_name, "' and '", name,
                "' have mismatched shapes ", first->sizes(), " vs ", t->sizes());
  }
}

k::DType kernel_dtype(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? k::DType::kFloat64 : k::DType::kFloat32;
}

// Runs the CPU kernel, or the CUDA kernel on the current stream of `like`'s
// device under a device guard (an op called on cuda:1 from a thread whose
// current device is cuda:0 must allocate and launch on cuda:1).
template <class CpuFn, class CudaFn>
void launch(const char* op, const at::Tensor& like, CpuFn&& cpu, CudaFn&& cuda) {
  if (!like.is_cuda()) {
    cpu();
    return;
  }
  TORCH_CHECK(k::cuda_kernels_available(), op, ": ", k::cuda_error_string(-1));
  // The generic guard keeps CUDA headers out of this translation unit.
  const c10::DeviceGuard guard(like.device());
  void* stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)
                     ->getStream(like.device())
                     .native_handle();
  const int status = cuda(stream);
  TORCH_CHECK(status == 0, op, ": CUDA kernel launch failed: ", k::cuda_error_string(status));
}

// Outputs are always contiguous, matching the fake implementations.
at::Tensor contiguous_output(const at::Tensor& like) {
  const std::optional<c10::DeviceGuard> guard =
      like.is_cuda() ? std::make_optional<c10::DeviceGuard>(like.device()) : std::nullopt;
  return at::empty(like.sizes(), like.options().memory_format(at::MemoryFormat::Contiguous));
}

std::pair<int64_t, int64_t> rows_cols(const char* op, const at::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1, op, ": expected a tensor with at least 1 dimension, got a scalar");
  const int64_t cols = x.size(-1);
  return {cols == 0 ? 0 : x.numel() / cols, cols};
}

}  // namespace

bool has_cuda_kernels() { return k::cuda_kernels_available(); }

at::Tensor noop(const at::Tensor& x) {
  constexpr const char* op = "dbench::noop";
  check_inputs(op, {{"x", &x}});
  const at::Tensor xc = x.contiguous();
  at::Tensor out = contiguous_output(xc);
  const auto dt = kernel_dtype(xc);
  launch(
      op, xc, [&] { k::noop_cpu(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel()); },
      [&](void* s) { return k::noop_cuda(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel(), s); });
  return out;
}

at::Tensor muladd(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  constexpr const char* op = "dbench::muladd";
  check_inputs(op, {{"a", &a}, {"b", &b}, {"c", &c}});
  const at::Tensor ac = a.contiguous(), bc = b.contiguous(), cc = c.contiguous();
  at::Tensor out = contiguous_output(ac);
  const auto dt = kernel_dtype(ac);
  launch(
      op, ac,
      [&] {
        k::muladd_cpu(dt, ac.const_data_ptr(), bc.const_data_ptr(), cc.const_data_ptr(),
                      out.mutable_data_ptr(), ac.numel());
      },
      [&](void* s) {
        return k::muladd_cuda(dt, ac.const_data_ptr(), bc.const_data_ptr(), cc.const_data_ptr(),
                              out.mutable_data_ptr(), ac.numel(), s);
      });
  return out;
}

at::Tensor l2norm(const at::Tensor& x, double eps) {
  constexpr const char* op = "dbench::l2norm";
  check_inputs(op, {{"x", &x}});
  TORCH_CHECK(eps > 0.0, op, ": eps must be positive, got ", eps);
  const auto [rows, cols] = rows_cols(op, x);
  const at::Tensor xc = x.contiguous();
  at::Tensor y = contiguous_output(xc);
  const auto dt = kernel_dtype(xc);
  launch(
      op, xc, [&] { k::l2norm_fwd_cpu(dt, xc.const_data_ptr(), y.mutable_data_ptr(), rows, cols, eps); },
      [&](void* s) {
        return k::l2norm_fwd_cuda(dt, xc.const_data_ptr(), y.mutable_data_ptr(), rows, cols, eps, s);
      });
  return y;
}

at::Tensor l2norm_backward(const at::Tensor& grad, const at::Tensor& x, double eps) {
  constexpr const char* op = "dbench::l2norm_backward";
  check_inputs(op, {{"grad", &grad}, {"x", &x}});
  TORCH_CHECK(eps > 0.0, op, ": eps must be positive, got ", eps);
  const auto [rows, cols] = rows_cols(op, x);
  const at::Tensor gc = grad.contiguous(), xc = x.contiguous();
  at::Tensor gx = contiguous_output(xc);
  const auto dt = kernel_dtype(xc);
  launch(
      op, xc,
      [&] {
        k::l2norm_bwd_cpu(dt, gc.const_data_ptr(), xc.const_data_ptr(), gx.mutable_data_ptr(), rows, cols, eps);
      },
      [&](void* s) {
        return k::l2norm_bwd_cuda(dt, gc.const_data_ptr(), xc.const_data_ptr(), gx.mutable_data_ptr(),
                                  rows, cols, eps, s);
      });
  return gx;
}

}  // namespace dbench
