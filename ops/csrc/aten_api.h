// The ATen tensor API of the op bodies (ops/native/<op>.h; op_checks.h says what an API holds), for
// launchers.cpp alone: the ops' ATen launchers (launchers.h AtenLauncher, KernelLauncher) are compiled
// there, and everyone else calls them.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "../kernels/kernels.h"
#include "message.h"
#include "launchers.h"
#include "native_op.h"
#include "op_checks.h"

namespace dbench {
// Internal linkage, so that the compiler inlines it into each op's body (with external linkage it
// kept parts out of line: about 50 instructions more per call in the instruction-count check).
namespace {

struct AtenApi {
  using Tensor = at::Tensor;
  using TensorParam = AtenTypes::TensorParam;  // native_op.h ParamOf
  static constexpr const char* kNamespace = AtenTypes::kNamespace;
  using NamedTensor = std::pair<const char*, const at::Tensor*>;

  // Every message is formatted by msg::cat, never by a stream (message.h says why);
  // TORCH_CHECK passes a single std::string through as it is.
  [[noreturn]] static void fail(const std::string& message) {
    TORCH_CHECK(false, message);
    __builtin_unreachable();
  }

  template <class... M>
  static void check(bool ok, const M&... message) {
    DBENCH_CHECK(ok, fail, message...);
  }

  static msg::Sizes sizes(const at::Tensor& t) { return {t.sizes().data(), t.sizes().size()}; }

  static const char* layout_name(at::Layout layout) {
    switch (layout) {
      case at::kStrided: return "Strided";
      case at::kSparse: return "Sparse";
      case at::kSparseCsr: return "SparseCsr";
      case at::kSparseCsc: return "SparseCsc";
      case at::kSparseBsr: return "SparseBsr";
      case at::kSparseBsc: return "SparseBsc";
      case at::kMkldnn: return "Mkldnn";
      case at::kJagged: return "Jagged";
      default: return "an unknown layout";
    }
  }

  // Input contract shared by every op; messages name the op and the argument.
  static bool supported(at::ScalarType t) {
    return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
  }

  static void check_inputs(const char* op, std::initializer_list<NamedTensor> args, InputRule rule = {}) {
    const auto& [first_name, first] = *args.begin();
    for (const auto& [name, t] : args) {
      DBENCH_CHECK(t->defined(), fail, op, ": argument '", name, "' is undefined");
      DBENCH_CHECK(t->layout() == at::kStrided, fail, op, ": argument '", name, "' has unsupported layout ",
                   layout_name(t->layout()), " (only strided tensors are supported)");
      DBENCH_CHECK(supported(t->scalar_type()), fail, op, ": argument '", name, "' has unsupported dtype ",
                   c10::toString(t->scalar_type()), " (", kExpectedDtypes, ")");
      DBENCH_CHECK(t->device().is_cpu() || t->device().is_cuda(), fail, op, ": argument '", name,
                   "' is on unsupported device ", t->device().str());
      DBENCH_CHECK(t->device() == first->device(), fail, op, ": arguments '", first_name, "' and '", name,
                   "' are on different devices (", first->device().str(), " vs ", t->device().str(), ")");
      DBENCH_CHECK(t->scalar_type() == first->scalar_type(), fail, op, ": arguments '", first_name, "' and '",
                   name, "' have different dtypes (", c10::toString(first->scalar_type()), " vs ",
                   c10::toString(t->scalar_type()), ")");
      DBENCH_CHECK(!rule.same_shape || t->sizes() == first->sizes(), fail, op, ": arguments '", first_name, "' and '", name,
                   "' have mismatched shapes ", sizes(*first), " vs ", sizes(*t));
    }
  }

  static at::Tensor contiguous(const at::Tensor& t) { return t.contiguous(); }

  // Outputs are always contiguous, matching the fake implementations.
  static at::Tensor contiguous_output(const at::Tensor& like) {
    const std::optional<c10::DeviceGuard> guard =
        like.is_cuda() ? std::make_optional<c10::DeviceGuard>(like.device()) : std::nullopt;
    return at::empty(like.sizes(), like.options().memory_format(at::MemoryFormat::Contiguous));
  }

  static at::Tensor empty_2d(const at::Tensor& like, int64_t rows, int64_t cols) {
    const std::optional<c10::DeviceGuard> guard =
        like.is_cuda() ? std::make_optional<c10::DeviceGuard>(like.device()) : std::nullopt;
    return at::empty({rows, cols}, like.options().memory_format(at::MemoryFormat::Contiguous));
  }

  static kernels::DType dtype(const at::Tensor& t) {
    switch (t.scalar_type()) {
      case at::kDouble: return kernels::DType::kFloat64;
      case at::kHalf: return kernels::DType::kFloat16;
      case at::kBFloat16: return kernels::DType::kBFloat16;
      default: return kernels::DType::kFloat32;  // check_inputs admitted nothing else
    }
  }

  // An op called on cuda:1 from a thread whose current device is cuda:0 must
  // allocate and launch on cuda:1: guard the device, use its current stream.
  template <class CpuFn, class CudaFn>
  static void launch(const char* op, const at::Tensor& like, CpuFn&& cpu, CudaFn&& cuda) {
    if (!like.is_cuda()) {
      cpu();
      return;
    }
    DBENCH_CHECK(kernels::cuda_kernels_available(), fail, op, ": ", kernels::cuda_error_string(-1));
    // The generic guard keeps CUDA headers out of this translation unit.
    const c10::DeviceGuard guard(like.device());
    void* stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(like.device()).native_handle();
    const int status = cuda(stream);
    DBENCH_CHECK(status == 0, fail, op, ": CUDA kernel launch failed: ", kernels::cuda_error_string(status));
  }
};

}  // namespace
}  // namespace dbench
