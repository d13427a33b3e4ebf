// The ATen launchers of the declared ops (ops/native/*.h: validate, allocate the output contiguously,
// pick the device's current stream under a device guard, call the shared kernel), which the raw
// module binds and the TORCH_LIBRARY ops register as their CPU and CUDA kernels; and beside them the
// kernel-level variants, the probes of which kernel a launch takes, and the timing aids.
#pragma once

#include <ATen/core/Tensor.h>

#include <type_traits>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../kernels/kernels.h"
#include "native_op.h"

namespace dbench {

// The ATen API's types, as a declaration's signature sees them (the API itself, aten_api.h, is local
// to launchers.cpp).
struct AtenTypes {
  using Tensor = at::Tensor;
  using TensorParam = const at::Tensor&;
  static constexpr char kNamespace[] = "dbench";
};

// Op's ATen launcher: a plain function with the schema's parameter types, compiled in launchers.cpp
// for every declared op and backward (a small translation unit, so it is inlined there as it always
// was; a caller elsewhere calls it out of line).
template <class Op, class A = typename Op::Args>
struct AtenLauncher;
template <class Op, class... K>
struct AtenLauncher<Op, native::Args<K...>> {
  using Result = decltype(Op::template forward<AtenTypes>(
      nullptr, std::declval<typename native::ParamOf<AtenTypes, K>::type>()...));
  static Result call(typename native::ParamOf<AtenTypes, K>::type... args);
};

template <class Op>
using AtenSig = std::remove_pointer_t<decltype(&AtenLauncher<Op>::call)>;

template <class Op, class... A>
typename AtenLauncher<Op>::Result launch(A&&... args) {
  return AtenLauncher<Op>::call(std::forward<A>(args)...);
}

// A kernel-level knob as the raw module takes it (native_op.h Knobs): its keyword, its default,
// its parameter type, and its value for the op's forward (a bad value refused, naming the op).
template <class Knob>
struct KnobArg;
template <>
struct KnobArg<native::IndexKnob> {
  static constexpr char kName[] = "index";
  using Param = const std::string&;
  static std::string fallback() { return "auto"; }
  static kernels::IndexWidth value(const char* op, const std::string& index);
};
template <>
struct KnobArg<native::PathKnob> {
  static constexpr char kName[] = "path";
  using Param = const std::string&;
  static std::string fallback() { return "auto"; }
  static kernels::RowPath value(const char* op, const std::string& path);
};
template <>
struct KnobArg<native::FirstKnob> {
  static constexpr char kName[] = "first";
  using Param = int64_t;
  static int64_t fallback() { return 0; }
  static int64_t value(const char*, int64_t first) { return first; }
};

// Op's kernel-level variant: its ATen launcher with its KernelKnobs after the schema's arguments
// (a forced offset width: a forced int32 that does not fit is refused before any work; l2norm's
// row schedule; one step of a chain at a time), reached from the raw module only. Compiled in
// launchers.cpp for every declaration that has knobs.
template <class Op, class A = typename Op::Args, class N = typename Op::KernelKnobs>
struct KernelLauncher;
template <class Op, class... K, class... N>
struct KernelLauncher<Op, native::Args<K...>, native::Knobs<N...>> {
  using Result = typename AtenLauncher<Op>::Result;
  static Result call(typename native::ParamOf<AtenTypes, K>::type... args, typename KnobArg<N>::Param... knobs);
};

namespace kernel_variants {
// The width `auto` picks for op's launch on these tensors (op's tensor arguments in schema
// order; meta tensors are fine: only sizes, strides and storage offsets are read).
std::string index_choice(const std::string& op, const std::vector<at::Tensor>& tensors);

// Registers and local bytes per thread of one CUDA kernel specialisation.
std::map<std::string, int> attributes(const std::string& kernel, const std::string& dtype, const std::string& index,
                                      bool vector, int64_t k);
}  // namespace kernel_variants

// Busy-waits cpu_ns on the calling thread and, for a CUDA tensor, queues a separate gpu_ns
// spin kernel on its current stream (timer validation; the sanitizer's coverage).
void spin(const at::Tensor& like, int64_t cpu_ns, int64_t gpu_ns);

// A known GPU cost for the gate's power tests (DBENCH_INJECT_GPU_NS): while alive, the CUDA
// forward kernels this thread launches (noop, muladd, l2norm, chain) first wait gpu_ns inside
// the kernel, so the case's own kernel gets longer and no launch is added.
class InKernelDelay {
 public:
  explicit InKernelDelay(int64_t gpu_ns);
  ~InKernelDelay();
  InKernelDelay(const InKernelDelay&) = delete;
  InKernelDelay& operator=(const InKernelDelay&) = delete;

 private:
  bool set_;
};

// Whether the elementwise CUDA kernels take their 16-byte vector path for these
// inputs: the predicate the launch applies (kernels::vector_path_ok) to the pointers
// the launchers pass (each input made contiguous; the fresh output is always aligned).
bool vector_path(const std::vector<at::Tensor>& tensors);

// The row schedule ("warp" or "block") l2norm's CUDA forward takes on these inputs (x, then the
// output or any other tensor whose pointer counts): kernels::resolve_row_path on the pointers
// the launchers pass, as vector_path does.
std::string row_path(const std::vector<at::Tensor>& tensors);

// The kernel mm(a, b) runs: "cpu", or on CUDA kernels::mm_kernel_name of kernels::mm_kernel_cuda
// ("wgmma", "mma_sync", "mma_sync_elementwise", "fma") on the pointers the launcher passes (the
// fresh output is always aligned). Raises where mm itself would refuse the kernel choice.
std::string mm_kernel(const at::Tensor& a, const at::Tensor& b);

// True when this build carries CUDA kernels.
bool has_cuda_kernels();

}  // namespace dbench
