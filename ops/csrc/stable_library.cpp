// Variant `stable`: the same kernels behind STABLE_TORCH_LIBRARY + TORCH_BOX,
// built against the LibTorch stable ABI only (TORCH_TARGET_VERSION pins the
// oldest torch this binary supports). No ATen headers are included here.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/Exception.h>

#ifdef DBENCH_WITH_CUDA
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#endif

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "../kernels/kernels.h"
#include "schemas.h"

namespace dbench::stable_ops {
namespace {

using torch::stable::Tensor;
using torch::headeronly::ScalarType;
namespace k = kernels;

using NamedTensor = std::pair<const char*, const Tensor*>;

void check_inputs(const char* op, std::initializer_list<NamedTensor> args) {
  const auto& [first_name, first] = *args.begin();
  for (const auto& [name, t] : args) {
    STD_TORCH_CHECK(t->defined(), op, ": argument '", name, "' is undefined");
    STD_TORCH_CHECK(t->scalar_type() == ScalarType::Float || t->scalar_type() == ScalarType::Double,
                    op, ": argument '", name, "' has unsupported dtype (expected float32 or float64)");
    STD_TORCH_CHECK(t->is_cpu() || t->is_cuda(), op, ": argument '", name, "' is on an unsupported device");
    STD_TORCH_CHECK(t->is_cuda() == first->is_cuda() && t->get_device_index() == first->get_device_index(),
                    op, ": arguments '", first_name, "' and '", name, "' are on different devices");
    STD_TORCH_CHECK(t->scalar_type() == first->scalar_type(), op, ": arguments '", first_name, "' and '",
                    name, "' have different dtypes");
    STD_TORCH_CHECK(t->sizes().equals(first->sizes()), op, ": arguments '", first_name, "' and '", name,
                    "' have mismatched shapes");
  }
}

k::DType kernel_dtype(const Tensor& t) {
  return t.scalar_type() == ScalarType::Double ? k::DType::kFloat64 : k::DType::kFloat32;
}

template <class CpuFn, class CudaFn>
void launch(const char* op, const Tensor& like, CpuFn&& cpu, CudaFn&& cuda) {
  if (!like.is_cuda()) {
    cpu();
    return;
  }
#ifdef DBENCH_WITH_CUDA
  const torch::stable::accelerator::DeviceGuard guard(like.get_device_index());
  void* stream = nullptr;
  STD_TORCH_CHECK(aoti_torch_get_current_cuda_stream(like.get_device_index(), &stream) == AOTI_TORCH_SUCCESS,
                  op, ": could not get the current CUDA stream");
  const int status = cuda(stream);
  STD_TORCH_CHECK(status == 0, op, ": CUDA kernel launch failed: ", k::cuda_error_string(status));
#else
  (void)cuda;
  STD_TORCH_CHECK(false, op, ": ", k::cuda_error_string(-1));
#endif
}

Tensor output_like(const Tensor& t) {
  return torch::stable::new_empty(t, t.sizes());  // contiguous, same dtype/device
}

Tensor noop(Tensor x) {
  constexpr const char* op = "dbench_stable::noop";
  check_inputs(op, {{"x", &x}});
  const Tensor xc = torch::stable::contiguous(x);
  Tensor out = output_like(xc);
  const auto dt = kernel_dtype(xc);
  launch(
      op, xc, [&] { k::noop_cpu(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel()); },
      [&](void* s) { return k::noop_cuda(dt, xc.const_data_ptr(), out.mutable_data_ptr(), xc.numel(), s); });
  return out;
}

Tensor muladd(Tensor a, Tensor b, Tensor c) {
  constexpr const char* op = "dbench_stable::muladd";
  check_inputs(op, {{"a", &a}, {"b", &b}, {"c", &c}});
  const Tensor ac = torch::stable::contiguous(a), bc = torch::stable::contiguous(b),
               cc = torch::stable::contiguous(c);
  Tensor out = output_like(ac);
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

Tensor l2norm(Tensor x, double eps) {
  constexpr const char* op = "dbench_stable::l2norm";
  check_inputs(op, {{"x", &x}});
  STD_TORCH_CHECK(eps > 0.0, op, ": eps must be positive");
  STD_TORCH_CHECK(x.dim() >= 1, op, ": expected a tensor with at least 1 dimension, got a scalar");
  const int64_t cols = x.size(x.dim() - 1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const Tensor xc = torch::stable::contiguous(x);
  Tensor y = output_like(xc);
  const auto dt = kernel_dtype(xc);
  launch(
      op, xc, [&] { k::l2norm_fwd_cpu(dt, xc.const_data_ptr(), y.mutable_data_ptr(), rows, cols, eps); },
      [&](void* s) {
        return k::l2norm_fwd_cuda(dt, xc.const_data_ptr(), y.mutable_data_ptr(), rows, cols, eps, s);
      });
  return y;
}

std::string def(const schema::OpSchema& s) { return std::string(s.name) + s.signature; }

}  // namespace
}  // namespace dbench::stable_ops

STABLE_TORCH_LIBRARY(dbench_stable, m) {
  using namespace dbench;
  m.def(stable_ops::def(schema::kNoop).c_str());
  m.def(stable_ops::def(schema::kMulAdd).c_str());
  m.def(stable_ops::def(schema::kL2Norm).c_str());
}

#define DBENCH_STABLE_IMPLS(m)                                           \
  m.impl(dbench::schema::kNoop.name, TORCH_BOX(&dbench::stable_ops::noop));     \
  m.impl(dbench::schema::kMulAdd.name, TORCH_BOX(&dbench::stable_ops::muladd)); \
  m.impl(dbench::schema::kL2Norm.name, TORCH_BOX(&dbench::stable_ops::l2norm))

STABLE_TORCH_LIBRARY_IMPL(dbench_stable, CPU, m) { DBENCH_STABLE_IMPLS(m); }
STABLE_TORCH_LIBRARY_IMPL(dbench_stable, CUDA, m) { DBENCH_STABLE_IMPLS(m); }
