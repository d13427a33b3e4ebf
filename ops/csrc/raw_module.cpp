// Variant `raw`: every native op's ATen launcher (native_ops.h, from ops/native/*.h) and its
// backward's, bound with pybind11, reached from Python with no dispatcher in between. This is the
// floor every other boundary is measured against. Also: the kernel-level variants (each declaration's
// KernelKnobs), and define_copy_first_op, which registers the args scenario's C++ ops at run time.
#include <torch/extension.h>

#include <type_traits>
#include <utility>

#include "launchers.h"
#include "native_ops.h"
#include "runtime_library.h"

namespace {

template <class Op, size_t... I>
void def_launcher(pybind11::module_& m, std::index_sequence<I...>) {
  static_assert(sizeof...(I) == Op::Args::kSize, "kArgNames must name every argument of the schema");
  m.def(Op::kName, &dbench::AtenLauncher<Op>::call, Op::kDoc, pybind11::arg(Op::kArgNames[I])...);
}

template <class Op>
void def_launcher(pybind11::module_& m) {
  def_launcher<Op>(m, std::make_index_sequence<Op::kArgNames.size()>{});
}

// Op's kernel-level variant (launchers.h KernelLauncher): the schema's arguments, then each knob as a
// keyword argument with its default.
template <class Op, size_t... I, class... N>
void def_kernel_variant(pybind11::module_& m, std::index_sequence<I...>, dbench::native::Knobs<N...>) {
  m.def(Op::kName, &dbench::KernelLauncher<Op>::call, Op::kDoc, pybind11::arg(Op::kArgNames[I])...,
        (pybind11::arg(dbench::KnobArg<N>::kName) = dbench::KnobArg<N>::fallback())...);
}

template <class Op>
void def_kernel_variant(pybind11::module_& m) {
  if constexpr (dbench::native::kHasKnobs<Op>) {
    def_kernel_variant<Op>(m, std::make_index_sequence<Op::kArgNames.size()>{}, typename Op::KernelKnobs{});
  }
}

}  // namespace

PYBIND11_MODULE(_dbench_raw, m) {
  m.doc() = "dbench launchers called directly (no dispatcher)";
  auto kernel = m.def_submodule("kernel", "kernel-level variants: forced offset width, one chain step at a time");
  dbench::native::for_each(dbench::native::AllOps{}, [&](auto tag) {
    using Op = typename decltype(tag)::type;
    def_launcher<Op>(m);
    def_kernel_variant<Op>(kernel);
    if constexpr (dbench::native::kHasBackward<Op>) {
      def_launcher<typename Op::backward>(m);
      def_kernel_variant<typename Op::backward>(kernel);
    }
  });

  namespace kv = dbench::kernel_variants;
  kernel.def("index_choice", &kv::index_choice, "the offset width 'auto' picks for op on these tensors",
             pybind11::arg("op"), pybind11::arg("tensors"));
  kernel.def("attributes", &kv::attributes, "registers and local bytes per thread of a CUDA kernel specialisation",
             pybind11::arg("kernel"), pybind11::arg("dtype"), pybind11::arg("index"), pybind11::arg("vector"),
             pybind11::arg("k") = 1);
  kernel.def("spin", &dbench::spin, "busy-wait cpu_ns here and gpu_ns on the tensor's GPU stream",
             pybind11::arg("like"), pybind11::arg("cpu_ns"), pybind11::arg("gpu_ns"));

  m.def("vector_path", &dbench::vector_path,
        "whether the elementwise CUDA kernels would take the 16-byte vector path for these inputs",
        pybind11::arg("tensors"));
  m.def("row_path", &dbench::row_path,
        "the row schedule ('warp' or 'block') l2norm's CUDA forward takes for these inputs (x first)",
        pybind11::arg("tensors"));
  m.def("mm_kernel", &dbench::mm_kernel, "the kernel mm(a, b) runs ('wgmma', 'mma_sync', ..., or 'cpu')",
        pybind11::arg("a"), pybind11::arg("b"));
  m.def("has_cuda_kernels", &dbench::has_cuda_kernels);
  m.def("define_copy_first_op", &dbench::define_copy_first_op,
        "define ns::name(signature) with one boxed CPU/CUDA kernel copying its first argument",
        pybind11::arg("ns"), pybind11::arg("name"), pybind11::arg("signature"));
}
