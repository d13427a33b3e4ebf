// Variant `stable`: the same kernels behind STABLE_TORCH_LIBRARY + TORCH_BOX,
// built against the LibTorch stable ABI only (TORCH_TARGET_VERSION pins the
// oldest torch this binary supports). No ATen headers are included here.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#ifdef DBENCH_WITH_CUDA
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#endif

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include "../kernels/kernels.h"
#include "message.h"
#include "op_bodies.h"
#include "schemas.h"

namespace dbench::stable_ops {
namespace {

using torch::headeronly::ScalarType;
namespace k = kernels;

// The dtype's name as c10::toString spells it (the ATen launchers' messages use that), written out
// here because not every torch release with the stable ABI exports a name function for it.
const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: return "Byte";
    case ScalarType::Char: return "Char";
    case ScalarType::Short: return "Short";
    case ScalarType::Int: return "Int";
    case ScalarType::Long: return "Long";
    case ScalarType::Half: return "Half";
    case ScalarType::Float: return "Float";
    case ScalarType::Double: return "Double";
    case ScalarType::ComplexFloat: return "ComplexFloat";
    case ScalarType::ComplexDouble: return "ComplexDouble";
    case ScalarType::Bool: return "Bool";
    case ScalarType::BFloat16: return "BFloat16";
    default: return "another dtype";
  }
}

struct StableApi {
  using Tensor = torch::stable::Tensor;
  using NamedTensor = std::pair<const char*, const Tensor*>;

  // What STD_TORCH_CHECK throws (std::runtime_error, raised as RuntimeError in
  // Python), with the message formatted without a stream (message.h says why).
  [[noreturn]] static void fail(const std::string& message) { throw std::runtime_error(message); }

  template <class... M>
  static void check(bool ok, const M&... message) {
    DBENCH_CHECK(ok, fail, message...);
  }

  // The ATen launchers' contract. No layout check: a sparse tensor never gets
  // here, the dispatcher has no Sparse kernel for these ops to send it to.
  static bool supported(ScalarType t) {
    return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half ||
           t == ScalarType::BFloat16;
  }

  static msg::Sizes sizes(const Tensor& t) { return {t.sizes().data(), t.sizes().size()}; }

  static void check_inputs(const char* op, std::initializer_list<NamedTensor> args, InputRule rule = {}) {
    const auto& [first_name, first] = *args.begin();
    for (const auto& [name, t] : args) {
      DBENCH_CHECK(t->defined(), fail, op, ": argument '", name, "' is undefined");
      DBENCH_CHECK(supported(t->scalar_type()), fail, op, ": argument '", name, "' has unsupported dtype ",
                   dtype_name(t->scalar_type()), " (", kExpectedDtypes, ")");
      DBENCH_CHECK(t->is_cpu() || t->is_cuda(), fail, op, ": argument '", name, "' is on an unsupported device");
      DBENCH_CHECK(t->is_cuda() == first->is_cuda() && t->get_device_index() == first->get_device_index(), fail,
                   op, ": arguments '", first_name, "' and '", name, "' are on different devices");
      DBENCH_CHECK(t->scalar_type() == first->scalar_type(), fail, op, ": arguments '", first_name, "' and '",
                   name, "' have different dtypes (", dtype_name(first->scalar_type()), " vs ",
                   dtype_name(t->scalar_type()), ")");
      DBENCH_CHECK(!rule.same_shape || t->sizes().equals(first->sizes()), fail, op, ": arguments '", first_name,
                   "' and '", name, "' have mismatched shapes ", sizes(*first), " vs ", sizes(*t));
    }
  }

  static Tensor contiguous(const Tensor& t) { return torch::stable::contiguous(t); }

  static Tensor contiguous_output(const Tensor& like) {
    return torch::stable::new_empty(like, like.sizes());  // contiguous, same dtype and device
  }

  static Tensor empty_2d(const Tensor& like, int64_t rows, int64_t cols) {
    const int64_t shape[] = {rows, cols};
    return torch::stable::new_empty(like, shape);  // contiguous, same dtype and device
  }

  static k::DType dtype(const Tensor& t) {
    switch (t.scalar_type()) {
      case ScalarType::Double: return k::DType::kFloat64;
      case ScalarType::Half: return k::DType::kFloat16;
      case ScalarType::BFloat16: return k::DType::kBFloat16;
      default: return k::DType::kFloat32;  // check_inputs admitted nothing else
    }
  }

  template <class CpuFn, class CudaFn>
  static void launch(const char* op, const Tensor& like, CpuFn&& cpu, CudaFn&& cuda) {
    if (!like.is_cuda()) {
      cpu();
      return;
    }
#ifdef DBENCH_WITH_CUDA
    const torch::stable::accelerator::DeviceGuard guard(like.get_device_index());
    void* stream = nullptr;
    DBENCH_CHECK(aoti_torch_get_current_cuda_stream(like.get_device_index(), &stream) == AOTI_TORCH_SUCCESS, fail,
                 op, ": could not get the current CUDA stream");
    const int status = cuda(stream);
    DBENCH_CHECK(status == 0, fail, op, ": CUDA kernel launch failed: ", k::cuda_error_string(status));
#else
    (void)cuda;
    fail(msg::cat(op, ": ", k::cuda_error_string(-1)));
#endif
  }
};

using Bodies = OpBodies<StableApi>;
using torch::stable::Tensor;

// TORCH_BOX needs plain functions with the schema's argument types.
Tensor noop(Tensor x) { return Bodies::noop("dbench_stable::noop", x); }
Tensor muladd(Tensor a, Tensor b, Tensor c) { return Bodies::muladd("dbench_stable::muladd", a, b, c); }
Tensor l2norm(Tensor x, double eps) { return Bodies::l2norm("dbench_stable::l2norm", x, eps); }
Tensor mm(Tensor a, Tensor b) { return Bodies::mm("dbench_stable::mm", a, b); }
Tensor chain(Tensor x, int64_t k) { return Bodies::chain("dbench_stable::chain", x, k); }

std::string def(const schema::OpSchema& s) { return std::string(s.name) + s.signature; }

}  // namespace
}  // namespace dbench::stable_ops

STABLE_TORCH_LIBRARY(dbench_stable, m) {
  using namespace dbench;
  m.def(stable_ops::def(schema::kNoop).c_str());
  m.def(stable_ops::def(schema::kMulAdd).c_str());
  m.def(stable_ops::def(schema::kL2Norm).c_str());
  m.def(stable_ops::def(schema::kMm).c_str());
  m.def(stable_ops::def(schema::kChain).c_str());
}

#define DBENCH_STABLE_IMPLS(m)                                           \
  m.impl(dbench::schema::kNoop.name, TORCH_BOX(&dbench::stable_ops::noop));     \
  m.impl(dbench::schema::kMulAdd.name, TORCH_BOX(&dbench::stable_ops::muladd)); \
  m.impl(dbench::schema::kL2Norm.name, TORCH_BOX(&dbench::stable_ops::l2norm)); \
  m.impl(dbench::schema::kMm.name, TORCH_BOX(&dbench::stable_ops::mm));        \
  m.impl(dbench::schema::kChain.name, TORCH_BOX(&dbench::stable_ops::chain))

STABLE_TORCH_LIBRARY_IMPL(dbench_stable, CPU, m) { DBENCH_STABLE_IMPLS(m); }
STABLE_TORCH_LIBRARY_IMPL(dbench_stable, CUDA, m) { DBENCH_STABLE_IMPLS(m); }
