// Variant `stable`: every native op (native_ops.h, from ops/native/*.h) behind
// STABLE_TORCH_LIBRARY + TORCH_BOX, the same kernels, built against the LibTorch stable ABI only
// (TORCH_TARGET_VERSION pins the oldest torch this binary supports). No ATen headers are included here.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#ifdef DBENCH_WITH_CUDA
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../kernels/kernels.h"
#include "message.h"
#include "native_op.h"
#include "native_ops.h"
#include "op_checks.h"

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
  using TensorParam = torch::stable::Tensor;  // by value: what TORCH_BOX takes (native_op.h ParamOf)
  static constexpr char kNamespace[] = "dbench_stable";
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

using torch::stable::Tensor;

// Each op's stable kernel: native::Bound<Op, StableApi>::call has the schema's argument types, as
// TORCH_BOX needs.
template <class Op>
using StableOp = native::Bound<Op, StableApi>;

void register_kernels(torch::stable::detail::StableLibrary& m) {
  native::for_each(native::AllOps{}, [&](auto tag) {
    using B = StableOp<typename decltype(tag)::type>;
    m.impl(decltype(tag)::type::kName, TORCH_BOX(&B::call));
  });
}

// ---------------------------------------------------------------------------------------------
// Ops defined while the process runs (the args scenario's generated schemas), the stable twin of
// runtime_library.cpp: one boxed kernel per kind of the arguments after the first. A stable boxed
// kernel owns its inputs (it must take each one off the stack, converting it to free it), and a
// function pointer carries no state, so the kind that says how to take them is a template argument.
using torch::stable::detail::StableLibrary;

template <class Rest>
void drop(StableIValue v) {
  (void)torch::stable::detail::to<Rest>(v);  // converted and destroyed: frees what it owned
}

// Not to<std::string>: up to at least torch 2.13 its header copies the string out of a `new` one that
// it never deletes, ~48 bytes lost per argument and call (pytorch/pytorch#191340), which a timing loop
// of millions of calls would turn into gigabytes. The handle is what the stack owns: delete it.
template <>
void drop<std::string>(StableIValue v) {
  StableApi::check(torch_delete_string(torch::stable::detail::to<StringHandle>(v)) == AOTI_TORCH_SUCCESS,
                   "dbench_stable: could not free a str argument");
}

template <class Rest>
void copy_first(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  StableApi::check(num_args >= 1 && num_outputs == 1, "dbench_stable: a copy-first op takes one or more ",
                   "arguments and returns one tensor, got ", num_args, " and ", num_outputs);
  Tensor first = torch::stable::detail::to<Tensor>(stack[0]);
  for (uint64_t i = 1; i < num_args; ++i) {
    drop<Rest>(stack[i]);
  }
  stack[0] = torch::stable::detail::from(native::noop::forward<StableApi>("dbench_stable::copy_first", first));
}

using BoxedKernel = void (*)(StableIValue*, uint64_t, uint64_t);

std::optional<BoxedKernel> kernel_for(std::string_view rest) {
  if (rest == "Tensor") return &copy_first<Tensor>;
  if (rest == "Tensor?") return &copy_first<std::optional<Tensor>>;
  if (rest == "Tensor[]") return &copy_first<std::vector<Tensor>>;
  if (rest == "float") return &copy_first<double>;
  if (rest == "int") return &copy_first<int64_t>;
  if (rest == "bool") return &copy_first<bool>;
  if (rest == "str") return &copy_first<std::string>;
  return std::nullopt;
}

// The libraries must outlive every call of their ops: deregistration happens in their destructors.
std::vector<std::unique_ptr<StableLibrary>>& kept_libraries() {
  static std::vector<std::unique_ptr<StableLibrary>> kept;
  return kept;
}

void define_copy_first(const char* ns, const char* name, const char* signature, const char* rest) {
  const std::optional<BoxedKernel> kernel = kernel_for(rest);
  StableApi::check(kernel.has_value(), "dbench_stable: no copy-first kernel for arguments of type '", rest,
                   "' (Tensor, Tensor?, Tensor[], float, int, bool, str)");
  static std::mutex guard;
  const std::lock_guard<std::mutex> lock(guard);
  auto& kept = kept_libraries();
  kept.push_back(std::make_unique<StableLibrary>(StableLibrary::Kind::FRAGMENT, ns, nullptr, __FILE__, __LINE__));
  kept.back()->def((std::string(name) + signature).c_str());
  for (const char* key : {"CPU", "CUDA"}) {
    kept.push_back(std::make_unique<StableLibrary>(StableLibrary::Kind::IMPL, ns, key, __FILE__, __LINE__));
    kept.back()->impl(name, *kernel);
  }
}

}  // namespace
}  // namespace dbench::stable_ops

// For ctypes (ops/native.py define_stable_copy_first_op): defines ns::name with `signature`, every
// argument after the first of type `rest`. Returns 0, or 1 with the reason in `error` (truncated to
// error_size - 1 bytes): no exception crosses a C boundary.
extern "C" __attribute__((visibility("default"))) int dbench_stable_define_copy_first(
    const char* ns, const char* name, const char* signature, const char* rest, char* error, size_t error_size) {
  try {
    dbench::stable_ops::define_copy_first(ns, name, signature, rest);
    return 0;
  } catch (const std::exception& e) {
    if (error_size > 0) {
      std::strncpy(error, e.what(), error_size - 1);
      error[error_size - 1] = '\0';
    }
    return 1;
  }
}

STABLE_TORCH_LIBRARY(dbench_stable, m) {
  dbench::native::for_each(dbench::native::AllOps{}, [&](auto tag) {
    using Op = typename decltype(tag)::type;
    m.def((std::string(Op::kName) + Op::kSignature).c_str());
  });
}

STABLE_TORCH_LIBRARY_IMPL(dbench_stable, CPU, m) { dbench::stable_ops::register_kernels(m); }
STABLE_TORCH_LIBRARY_IMPL(dbench_stable, CUDA, m) { dbench::stable_ops::register_kernels(m); }
