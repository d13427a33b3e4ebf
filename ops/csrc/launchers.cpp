#include "launchers.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <initializer_list>
#include <optional>
#include <utility>

#include "../kernels/kernels.h"
#include "op_bodies.h"

namespace dbench {
namespace {

namespace k = kernels;

struct AtenApi {
  using Tensor = at::Tensor;
  using NamedTensor = std::pair<const char*, const at::Tensor*>;

  template <class... M>
  static void check(bool ok, const M&... message) {
    TORCH_CHECK(ok, message...);
  }

  // Input contract shared by every op; messages name the op and the argument.
  static void check_inputs(const char* op, std::initializer_list<NamedTensor> args) {
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

  static at::Tensor contiguous(const at::Tensor& t) { return t.contiguous(); }

  // Outputs are always contiguous, matching the fake implementations.
  static at::Tensor contiguous_output(const at::Tensor& like) {
    const std::optional<c10::DeviceGuard> guard =
        like.is_cuda() ? std::make_optional<c10::DeviceGuard>(like.device()) : std::nullopt;
    return at::empty(like.sizes(), like.options().memory_format(at::MemoryFormat::Contiguous));
  }

  static k::DType dtype(const at::Tensor& t) {
    return t.scalar_type() == at::kDouble ? k::DType::kFloat64 : k::DType::kFloat32;
  }

  // An op called on cuda:1 from a thread whose current device is cuda:0 must
  // allocate and launch on cuda:1: guard the device, use its current stream.
  template <class CpuFn, class CudaFn>
  static void launch(const char* op, const at::Tensor& like, CpuFn&& cpu, CudaFn&& cuda) {
    if (!like.is_cuda()) {
      cpu();
      return;
    }
    TORCH_CHECK(k::cuda_kernels_available(), op, ": ", k::cuda_error_string(-1));
    // The generic guard keeps CUDA headers out of this translation unit.
    const c10::DeviceGuard guard(like.device());
    void* stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(like.device()).native_handle();
    const int status = cuda(stream);
    TORCH_CHECK(status == 0, op, ": CUDA kernel launch failed: ", k::cuda_error_string(status));
  }
};

using Bodies = OpBodies<AtenApi>;

}  // namespace

bool has_cuda_kernels() { return k::cuda_kernels_available(); }

at::Tensor noop(const at::Tensor& x) { return Bodies::noop("dbench::noop", x); }

at::Tensor muladd(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  return Bodies::muladd("dbench::muladd", a, b, c);
}

at::Tensor l2norm(const at::Tensor& x, double eps) { return Bodies::l2norm("dbench::l2norm", x, eps); }

at::Tensor l2norm_backward(const at::Tensor& grad, const at::Tensor& x, double eps) {
  return Bodies::l2norm_backward("dbench::l2norm_backward", grad, x, eps);
}

}  // namespace dbench
