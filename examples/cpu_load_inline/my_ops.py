"""A user's CPU op, built the way many are: C++ compiled at import with load_inline, registered with the
author's own TORCH_LIBRARY block (plus a fake and an autograd formula from Python), and declared once
for dbench. Nothing here is part of the suite.

    dbench run --scenario boundary --op my_ops.py:rmsnorm --device cpu

times every registration variant generated from the launcher beside the author's own op (the
`registered` row), after checking each against the reference.
"""

from __future__ import annotations

import torch
from torch.utils.cpp_extension import load_inline

from dbench import Op, Work

CPP = r"""
#include <torch/extension.h>
#include <cmath>
#include <tuple>

// y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps) per row of the last dimension.
std::tuple<at::Tensor, at::Tensor> rmsnorm_fwd(const at::Tensor& x_in, const at::Tensor& w_in, double eps) {
  TORCH_CHECK(x_in.dim() >= 1 && w_in.dim() == 1 && w_in.size(0) == x_in.size(-1), "rmsnorm: w must be [x.size(-1)]");
  TORCH_CHECK(x_in.scalar_type() == w_in.scalar_type(), "rmsnorm: x and w must have one dtype");
  auto x = x_in.contiguous(), w = w_in.contiguous();
  const int64_t cols = x.size(-1), rows = cols ? x.numel() / cols : 0;
  auto y = at::empty_like(x);
  auto stat_shape = x.sizes().vec();
  stat_shape.back() = 1;
  auto rstd = at::empty(stat_shape, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rmsnorm_fwd", [&] {
    const scalar_t *xp = x.data_ptr<scalar_t>(), *wp = w.data_ptr<scalar_t>();
    scalar_t *yp = y.data_ptr<scalar_t>(), *rp = rstd.data_ptr<scalar_t>();
    for (int64_t r = 0; r < rows; ++r) {
      scalar_t ss = 0;
      for (int64_t c = 0; c < cols; ++c) ss += xp[r * cols + c] * xp[r * cols + c];
      const scalar_t inv = scalar_t(1) / std::sqrt(ss / cols + scalar_t(eps));
      rp[r] = inv;
      for (int64_t c = 0; c < cols; ++c) yp[r * cols + c] = xp[r * cols + c] * inv * wp[c];
    }
  });
  return {y, rstd};
}

// gx = rstd * (g*w - xhat * mean(g*w*xhat)), gw = sum over rows of g * xhat.
std::tuple<at::Tensor, at::Tensor> rmsnorm_bwd(const at::Tensor& g_in, const at::Tensor& x_in,
                                               const at::Tensor& w_in, const at::Tensor& rstd_in, double eps) {
  auto g = g_in.contiguous(), x = x_in.contiguous(), w = w_in.contiguous(), rstd = rstd_in.contiguous();
  const int64_t cols = x.size(-1), rows = cols ? x.numel() / cols : 0;
  auto gx = at::empty_like(x);
  auto gw = at::zeros_like(w);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rmsnorm_bwd", [&] {
    const scalar_t *gp = g.data_ptr<scalar_t>(), *xp = x.data_ptr<scalar_t>(), *wp = w.data_ptr<scalar_t>();
    const scalar_t* rp = rstd.data_ptr<scalar_t>();
    scalar_t *gxp = gx.data_ptr<scalar_t>(), *gwp = gw.data_ptr<scalar_t>();
    for (int64_t r = 0; r < rows; ++r) {
      const scalar_t inv = rp[r];
      scalar_t dot = 0;
      for (int64_t c = 0; c < cols; ++c) dot += gp[r * cols + c] * wp[c] * xp[r * cols + c] * inv;
      dot /= cols;
      for (int64_t c = 0; c < cols; ++c) {
        const scalar_t xhat = xp[r * cols + c] * inv;
        gxp[r * cols + c] = inv * (gp[r * cols + c] * wp[c] - xhat * dot);
        gwp[c] += gp[r * cols + c] * xhat;
      }
    }
  });
  return {gx, gw};
}

// The author's own registration: their op, as their model calls it.
TORCH_LIBRARY(my_ext, m) {
  m.def("rmsnorm(Tensor x, Tensor w, float eps) -> (Tensor, Tensor)");
  m.def("rmsnorm_backward(Tensor grad, Tensor x, Tensor w, Tensor rstd, float eps) -> (Tensor, Tensor)");
}
TORCH_LIBRARY_IMPL(my_ext, CPU, m) {
  m.impl("rmsnorm", &rmsnorm_fwd);
  m.impl("rmsnorm_backward", &rmsnorm_bwd);
}
"""

ext = load_inline(name="my_rmsnorm_ext", cpp_sources=CPP, functions=["rmsnorm_fwd", "rmsnorm_bwd"],
                  extra_cflags=["-O2"], verbose=False)


# The author's fake and autograd formula for their registered op (what torch.compile and training need).
@torch.library.register_fake("my_ext::rmsnorm")
def _fake(x: torch.Tensor, w: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    # The kernel writes contiguous outputs, whatever the input's strides (empty_like would keep them).
    return x.new_empty(x.shape), x.new_empty((*x.shape[:-1], 1))


@torch.library.register_fake("my_ext::rmsnorm_backward")
def _fake_bwd(g: torch.Tensor, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor, eps: float):
    return x.new_empty(x.shape), w.new_empty(w.shape)


def _setup(ctx, inputs, output) -> None:
    x, w, eps = inputs
    ctx.save_for_backward(x, w, output[1])
    ctx.eps = eps
    ctx.mark_non_differentiable(output[1])


def _backward(ctx, grad_y, grad_rstd):
    x, w, rstd = ctx.saved_tensors
    gx, gw = torch.ops.my_ext.rmsnorm_backward(grad_y, x, w, rstd, ctx.eps)
    return gx, gw, None


torch.library.register_autograd("my_ext::rmsnorm", _backward, setup_context=_setup)


def reference(x: torch.Tensor, w: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * rstd * w, rstd


def work(args) -> Work:
    x, w, _ = args
    rows = x.numel() // x.shape[-1]
    return Work(bytes_read=x.nbytes + w.nbytes, bytes_written=x.nbytes + rows * x.element_size(), flops=4 * x.numel())


rmsnorm = Op(
    name="my_rmsnorm",
    forward=ext.rmsnorm_fwd,                      # the pybind launcher: the `raw` row
    inputs=("x", "w"),
    scalars={"eps": 1e-6},
    outputs=("y", "rstd"),
    nondifferentiable_outputs=("rstd",),          # a saved statistic
    shapes=lambda shape: (shape, shape[-1:]),     # x [..., n], w [n]
    rowwise=True,
    shape=(8, 512),
    dtypes=(torch.float32, torch.float64),
    backward=ext.rmsnorm_bwd,
    saves=("x", "w", "rstd"),
    reference=reference,
    fake=_fake,
    work=work,
    registered=torch.ops.my_ext.rmsnorm,          # the author's TORCH_LIBRARY op: the `registered` row
    native=reference,                             # the same formula in PyTorch ops: the `aten` row
    description="RMSNorm with weight, C++ (load_inline), forward and backward kernels",
)
