#include "launchers.h"

#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include "../kernels/kernels.h"
#include "aten_api.h"
#include "message.h"
#include "native_ops.h"

namespace dbench {
namespace {

namespace k = kernels;

}  // namespace

bool has_cuda_kernels() { return k::cuda_kernels_available(); }

template <class Op, class... K>
typename AtenLauncher<Op, native::Args<K...>>::Result AtenLauncher<Op, native::Args<K...>>::call(
    typename native::ParamOf<AtenTypes, K>::type... args) {
  return native::Bound<Op, AtenApi>::call(args...);
}

namespace {
template <class Op>
constexpr auto launchers_of() {
  if constexpr (native::kHasBackward<Op>) {
    return std::tuple{&AtenLauncher<Op>::call, &AtenLauncher<typename Op::backward>::call};
  } else {
    return std::tuple{&AtenLauncher<Op>::call};
  }
}
template <class... Ops>
constexpr auto launchers_of(native::List<Ops...>) {
  return std::tuple_cat(launchers_of<Ops>()...);
}
}  // namespace

// Every declared op's and backward's launcher, taken here so that this translation unit emits them
// all for the others, which see only their declaration (launchers.h). Constant-initialised, with
// no destructor: the static library is linked into several binaries of one process.
extern const decltype(launchers_of(native::AllOps{})) kAtenLaunchers;
constexpr decltype(launchers_of(native::AllOps{})) kAtenLaunchers = launchers_of(native::AllOps{});

k::IndexWidth KnobArg<native::IndexKnob>::value(const char* op, const std::string& index) {
  if (index == "auto") return k::IndexWidth::kAuto;
  if (index == "int32") return k::IndexWidth::kInt32;
  if (index == "int64") return k::IndexWidth::kInt64;
  AtenApi::fail(msg::cat(op, ": index must be 'auto', 'int32' or 'int64', got '", index, "'"));
}

k::RowPath KnobArg<native::PathKnob>::value(const char* op, const std::string& path) {
  if (path == "auto") return k::RowPath::kAuto;
  if (path == "warp") return k::RowPath::kWarp;
  if (path == "block") return k::RowPath::kBlock;
  AtenApi::fail(msg::cat(op, ": path must be 'auto', 'warp' or 'block', got '", path, "'"));
}

template <class Op, class... K, class... N>
typename KernelLauncher<Op, native::Args<K...>, native::Knobs<N...>>::Result
KernelLauncher<Op, native::Args<K...>, native::Knobs<N...>>::call(typename native::ParamOf<AtenTypes, K>::type... args,
                                                                  typename KnobArg<N>::Param... knobs) {
  using Name = native::Qualified<AtenApi::kNamespace, Op::kName>;
  return Op::template forward<AtenApi>(Name::c_str(), args..., KnobArg<N>::value(Name::c_str(), knobs)...);
}

namespace {
template <class Op>
constexpr auto kernel_launchers_of() {
  if constexpr (native::kHasKnobs<Op>) {
    return std::tuple{&KernelLauncher<Op>::call};
  } else {
    return std::tuple{};
  }
}
template <class Op>
constexpr auto op_kernel_launchers() {
  if constexpr (native::kHasBackward<Op>) {
    return std::tuple_cat(kernel_launchers_of<Op>(), kernel_launchers_of<typename Op::backward>());
  } else {
    return kernel_launchers_of<Op>();
  }
}
template <class... Ops>
constexpr auto kernel_launchers_of(native::List<Ops...>) {
  return std::tuple_cat(op_kernel_launchers<Ops>()...);
}
}  // namespace

// Every kernel-level variant, taken here for the raw module as kAtenLaunchers are.
extern const decltype(kernel_launchers_of(native::AllOps{})) kKernelLaunchers;
constexpr decltype(kernel_launchers_of(native::AllOps{})) kKernelLaunchers = kernel_launchers_of(native::AllOps{});

namespace kernel_variants {
namespace {

k::DType parse_dtype(const std::string& dtype) {
  if (dtype == "float32") return k::DType::kFloat32;
  if (dtype == "float64") return k::DType::kFloat64;
  if (dtype == "float16") return k::DType::kFloat16;
  if (dtype == "bfloat16") return k::DType::kBFloat16;
  AtenApi::fail(msg::cat("attributes: dtype must be 'float16', 'bfloat16', 'float32' or 'float64', got '", dtype,
                         "'"));
}

}  // namespace

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
  for (const auto& t : tensors) fit = fit && OpChecks<AtenApi>::view_fits(t);
  return k::index_name(k::resolve_index(k::IndexWidth::kAuto, fit, reach));
}

std::map<std::string, int> attributes(const std::string& kernel, const std::string& dtype, const std::string& index,
                                      bool vector, int64_t k) {
  const k::IndexWidth w = KnobArg<native::IndexKnob>::value("attributes", index);
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
