#include "launchers.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../kernels/kernels.h"
#include "message.h"
#include "op_bodies.h"

namespace dbench {
namespace {

namespace k = kernels;

struct AtenApi {
  using Tensor = at::Tensor;
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

  static k::DType dtype(const at::Tensor& t) {
    switch (t.scalar_type()) {
      case at::kDouble: return k::DType::kFloat64;
      case at::kHalf: return k::DType::kFloat16;
      case at::kBFloat16: return k::DType::kBFloat16;
      default: return k::DType::kFloat32;  // check_inputs admitted nothing else
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
    DBENCH_CHECK(k::cuda_kernels_available(), fail, op, ": ", k::cuda_error_string(-1));
    // The generic guard keeps CUDA headers out of this translation unit.
    const c10::DeviceGuard guard(like.device());
    void* stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(like.device()).native_handle();
    const int status = cuda(stream);
    DBENCH_CHECK(status == 0, fail, op, ": CUDA kernel launch failed: ", k::cuda_error_string(status));
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

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) { return Bodies::mm("dbench::mm", a, b); }

at::Tensor chain(const at::Tensor& x, int64_t k) { return Bodies::chain("dbench::chain", x, k); }

at::Tensor chain_backward(const at::Tensor& grad, const at::Tensor& x, int64_t k) {
  return Bodies::chain_backward("dbench::chain_backward", grad, x, k);
}

namespace kernel_variants {
namespace {

k::IndexWidth parse_index(const char* op, const std::string& index) {
  if (index == "auto") return k::IndexWidth::kAuto;
  if (index == "int32") return k::IndexWidth::kInt32;
  if (index == "int64") return k::IndexWidth::kInt64;
  AtenApi::fail(msg::cat(op, ": index must be 'auto', 'int32' or 'int64', got '", index, "'"));
}

k::RowPath parse_row_path(const char* op, const std::string& path) {
  if (path == "auto") return k::RowPath::kAuto;
  if (path == "warp") return k::RowPath::kWarp;
  if (path == "block") return k::RowPath::kBlock;
  AtenApi::fail(msg::cat(op, ": path must be 'auto', 'warp' or 'block', got '", path, "'"));
}

k::DType parse_dtype(const std::string& dtype) {
  if (dtype == "float32") return k::DType::kFloat32;
  if (dtype == "float64") return k::DType::kFloat64;
  if (dtype == "float16") return k::DType::kFloat16;
  if (dtype == "bfloat16") return k::DType::kBFloat16;
  AtenApi::fail(msg::cat("attributes: dtype must be 'float16', 'bfloat16', 'float32' or 'float64', got '", dtype,
                         "'"));
}

}  // namespace

at::Tensor noop(const at::Tensor& x, const std::string& index) {
  constexpr const char* op = "dbench::noop";
  return Bodies::noop(op, x, parse_index(op, index));
}

at::Tensor muladd(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c, const std::string& index) {
  constexpr const char* op = "dbench::muladd";
  return Bodies::muladd(op, a, b, c, parse_index(op, index));
}

at::Tensor l2norm(const at::Tensor& x, double eps, const std::string& index, const std::string& path) {
  constexpr const char* op = "dbench::l2norm";
  return Bodies::l2norm(op, x, eps, parse_index(op, index), parse_row_path(op, path));
}

at::Tensor l2norm_backward(const at::Tensor& grad, const at::Tensor& x, double eps, const std::string& index) {
  constexpr const char* op = "dbench::l2norm_backward";
  return Bodies::l2norm_backward(op, grad, x, eps, parse_index(op, index));
}

at::Tensor chain(const at::Tensor& x, int64_t k, int64_t first, const std::string& index) {
  constexpr const char* op = "dbench::chain";
  return Bodies::chain(op, x, k, first, parse_index(op, index));
}

at::Tensor chain_backward(const at::Tensor& grad, const at::Tensor& x, int64_t k, const std::string& index) {
  constexpr const char* op = "dbench::chain_backward";
  return Bodies::chain_backward(op, grad, x, k, parse_index(op, index));
}

std::string index_choice(const std::string& op, const std::vector<at::Tensor>& tensors) {
  DBENCH_CHECK(!tensors.empty(), AtenApi::fail, "index_choice: expected at least one tensor");
  const at::Tensor& x = tensors.back();  // the row-wise ops' x is their last tensor argument
  int64_t reach = 0;
  if (op == "l2norm" || op == "l2norm_backward") {
    const int64_t cols = x.dim() == 0 ? 1 : x.size(x.dim() - 1);
    reach = k::rowwise_reach(cols == 0 ? 0 : x.numel() / cols, cols);
  } else if (op == "noop" || op == "muladd" || op == "chain" || op == "chain_backward") {
    reach = k::elementwise_reach(x.numel());
  } else {
    AtenApi::fail(msg::cat("index_choice: no index width for op '", op, "'"));
  }
  bool fit = true;
  for (const auto& t : tensors) fit = fit && Bodies::view_fits(t);
  return k::index_name(k::resolve_index(k::IndexWidth::kAuto, fit, reach));
}

std::map<std::string, int> attributes(const std::string& kernel, const std::string& dtype, const std::string& index,
                                      bool vector, int64_t k) {
  const k::IndexWidth w = parse_index("attributes", index);
  DBENCH_CHECK(w != k::IndexWidth::kAuto, AtenApi::fail, "attributes: index must be 'int32' or 'int64'");
  k::KernelAttributes a;
  const int status = k::kernel_attributes(kernel.c_str(), parse_dtype(dtype), w, vector, static_cast<int>(k), &a);
  DBENCH_CHECK(status == 0, AtenApi::fail, "attributes of kernel '", kernel, "': ", k::cuda_error_string(status));
  return {{"registers", a.registers}, {"local_bytes", a.local_bytes}, {"max_threads", a.max_threads}};
}

}  // namespace kernel_variants

void spin(const at::Tensor& like, int64_t cpu_ns, int64_t gpu_ns) {
  if (cpu_ns > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(cpu_ns);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
  if (gpu_ns > 0 && like.is_cuda()) {
    AtenApi::launch("spin", like, [] {}, [&](void* s) { return k::spin_cuda(gpu_ns, s); });
  }
}

InKernelDelay::InKernelDelay(int64_t gpu_ns) : set_(gpu_ns > 0) {
  if (set_) k::set_launch_delay_ns(gpu_ns);
}
InKernelDelay::~InKernelDelay() {
  if (set_) k::set_launch_delay_ns(0);
}

namespace {
// The pointers the launchers pass for these inputs: each made contiguous (`kept` holds the copies
// alive while their pointers are read), checked as an op's inputs are.
std::vector<const void*> launch_pointers(const char* what, const std::vector<at::Tensor>& tensors,
                                         std::vector<at::Tensor>& kept) {
  DBENCH_CHECK(!tensors.empty(), AtenApi::fail, what, ": expected at least one tensor");
  std::vector<const void*> ptrs;
  for (const auto& t : tensors) {
    AtenApi::check_inputs(what, {{"tensor", &t}, {"first", &tensors.front()}});
    kept.push_back(t.contiguous());
    ptrs.push_back(kept.back().const_data_ptr());
  }
  return ptrs;
}
}  // namespace

bool vector_path(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> kept;
  const auto ptrs = launch_pointers("vector_path", tensors, kept);
  return k::vector_path_ok(ptrs.data(), static_cast<int>(ptrs.size()), tensors.front().numel(),
                           AtenApi::dtype(tensors.front()));
}

std::string row_path(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> kept;
  const auto ptrs = launch_pointers("row_path", tensors, kept);
  const at::Tensor& x = tensors.front();
  DBENCH_CHECK(x.dim() >= 1, AtenApi::fail, "row_path: expected a tensor with at least 1 dimension, got a scalar");
  const auto path = k::resolve_row_path(k::RowPath::kAuto, ptrs.data(), static_cast<int>(ptrs.size()),
                                        x.size(x.dim() - 1), AtenApi::dtype(x));
  return k::row_path_name(path);
}

std::string mm_kernel(const at::Tensor& a, const at::Tensor& b) {
  AtenApi::check_inputs("mm_kernel", {{"a", &a}, {"b", &b}}, kMatmulInputs);
  DBENCH_CHECK(a.dim() == 2 && b.dim() == 2, AtenApi::fail, "mm_kernel: expected two matrices, got ", a.dim(),
               "-D and ", b.dim(), "-D tensors");
  if (!a.is_cuda()) return "cpu";
  DBENCH_CHECK(k::cuda_kernels_available(), AtenApi::fail, "mm_kernel: ", k::cuda_error_string(-1));
  const c10::DeviceGuard guard(a.device());
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();  // what mm passes its kernel
  k::MmKernel kernel{};
  const int status = k::mm_kernel_cuda(AtenApi::dtype(ac), ac.const_data_ptr(), bc.const_data_ptr(), nullptr,
                                       a.size(1), b.size(1), &kernel);
  DBENCH_CHECK(status == 0, AtenApi::fail, "mm_kernel: ", k::cuda_error_string(status));
  return k::mm_kernel_name(kernel);
}

}  // namespace dbench
