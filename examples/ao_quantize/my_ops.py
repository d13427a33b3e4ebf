"""A public library's quantizer with integer inputs and an integer output: torchao's
`quantize_affine` (blockwise int8 quantization), declared as its user would, from outside the suite.

    pip install torchao
    dbench run --scenario boundary --device cpu --op my_ops.py:quantize_int8

The launcher is the library's Python function; the library's own registered op
(`torchao::quantize_affine`, a Python composite with `SymInt[]`, `ScalarType` and `Scalar?`
arguments) is the `registered` row, through `registered_args`. Each row of 64 values has one
scale (positive floats from a maker of ours) and one int32 zero point (`inputs.integers`); the
output is int8, compared exactly with a float64 reference that rounds the same way (half to even).

The floor here is the library's public function, and it calls the library's registered op itself
(under torch.no_grad, through a private function registered with torch.library): so `registered`,
the op called directly, reads below `raw`, by that wrapper's cost.
"""

import torch
from torchao.quantization.quant_primitives import quantize_affine

from dbench import Op, inputs

BLOCK = (1, 64)  # one scale and zero point per 64 consecutive values of a row


def quantize(x, scale, zero_point):
    return quantize_affine(x, BLOCK, scale, zero_point, torch.int8, -128, 127)


def reference(x, scale, zero_point):  # each block's scale and zero point over its 64 values
    scale, zero_point = (t.double().repeat_interleave(BLOCK[1], dim=-1) for t in (scale, zero_point))
    return (torch.round(x.double() / scale) + zero_point).clamp(-128, 127).to(torch.int8)


def scales(ctx):  # positive, small enough that most values land inside int8 without clamping
    return (torch.rand(ctx.shape, generator=ctx.generator) * 0.05 + 0.01).to(ctx.dtype).to(ctx.device)


quantize_int8 = Op(
    name="ao_quantize_int8", forward=quantize, inputs=("x", "scale", "zero_point"), shape=(64, 64),
    shapes=lambda s: (s, (s[0], s[1] // 64), (s[0], s[1] // 64)),
    input_makers={"scale": scales, "zero_point": inputs.integers(-8, 8, dtype=torch.int32)},
    reference=reference, registered=torch.ops.torchao.quantize_affine,
    registered_args=lambda x, scale, zero_point: (x, list(BLOCK), scale, zero_point, torch.int8, -128, 127),
    description="torchao quantize_affine: blockwise int8, one scale and zero point per 64 values",
)
