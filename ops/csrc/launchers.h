// ATen-level launchers: validate, allocate the output contiguously, pick the
// device's current stream under a device guard, and call the shared kernel.
// The pybind `raw` variant calls these directly; the TORCH_LIBRARY ops
// register them as their CPU and CUDA kernels.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace dbench {

at::Tensor noop(const at::Tensor& x);
at::Tensor muladd(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c);
at::Tensor l2norm(const at::Tensor& x, double eps);
at::Tensor l2norm_backward(const at::Tensor& grad, const at::Tensor& x, double eps);

at::Tensor mm(const at::Tensor& a, const at::Tensor& b);

// Whether the elementwise CUDA kernels take their 16-byte vector path for these
// inputs: the predicate the launch applies (kernels::vector_path_ok) to the pointers
// the launchers pass (each input made contiguous; the fresh output is always aligned).
bool vector_path(const std::vector<at::Tensor>& tensors);

// True when this build carries CUDA kernels.
bool has_cuda_kernels();

}  // namespace dbench
