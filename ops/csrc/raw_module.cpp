// Variant `raw`: the launchers bound with pybind11, reached from Python with no
// dispatcher in between. This is the floor every other boundary is measured
// against.
#include <torch/extension.h>

#include "launchers.h"

PYBIND11_MODULE(_dbench_raw, m) {
  m.doc() = "dbench launchers called directly (no dispatcher)";
  m.def("noop", &dbench::noop, "identity copy", pybind11::arg("x"));
  m.def("muladd", &dbench::muladd, "a * b + c", pybind11::arg("a"), pybind11::arg("b"), pybind11::arg("c"));
  m.def("l2norm", &dbench::l2norm, "row-wise L2 normalisation", pybind11::arg("x"), pybind11::arg("eps"));
  m.def("l2norm_backward", &dbench::l2norm_backward, "gradient of l2norm", pybind11::arg("grad"),
        pybind11::arg("x"), pybind11::arg("eps"));
  m.def("mm", &dbench::mm, "a @ b (tensor cores for float16/bfloat16 on CUDA)", pybind11::arg("a"),
        pybind11::arg("b"));
  m.def("vector_path", &dbench::vector_path,
        "whether the elementwise CUDA kernels would take the 16-byte vector path for these inputs",
        pybind11::arg("tensors"));
  m.def("has_cuda_kernels", &dbench::has_cuda_kernels);
}
