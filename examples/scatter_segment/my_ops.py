"""A public library's op with an integer input: torch_scatter's `segment_sum_csr` (sums of row
segments given by CSR offsets), declared as its user would, from outside the suite.

    pip install --no-build-isolation torch-scatter     # builds its C++ ops against your torch
    dbench run --scenario boundary --device cpu --op my_ops.py:segment_sum

The launcher is the library's Python function; the library's own registered op
(`torch_scatter::segment_sum_csr`, with its `Tensor? out` argument left None) is the `registered`
row; PyTorch's `segment_reduce` is the `aten` row. `indptr` is int64 sorted offsets over the rows of
`src` (dbench.inputs.offsets()), never random floats, and gets no gradient.
"""

import torch
import torch_scatter

from dbench import Op, inputs


def segment_sum(src, indptr):  # src [N, D], indptr [S + 1] from 0 to N -> [S, D]
    return torch_scatter.segment_sum_csr(src, indptr)


def segment_sum_backward(grad, src, indptr):  # each row of src gets its segment's gradient
    return torch_scatter.gather_csr(grad, indptr)


def reference(src, indptr):  # float64, from the offsets' definition alone
    counts = indptr[1:] - indptr[:-1]
    ids = torch.repeat_interleave(torch.arange(counts.numel(), device=src.device), counts)
    return torch.zeros(counts.numel(), src.shape[1], dtype=torch.float64, device=src.device).index_add(
        0, ids, src.double())


def aten_segment_sum(src, indptr):
    return torch.segment_reduce(src, "sum", offsets=indptr, axis=0)


segment_sum = Op(
    name="scatter_segment_sum", forward=segment_sum, inputs=("src", "indptr"), shape=(256, 32),
    shapes=lambda s: (s, (s[0] // 8 + 1,)), input_makers={"indptr": inputs.offsets()},
    differentiable=("src",), backward=segment_sum_backward, saves=("src", "indptr"),
    reference=reference, native=aten_segment_sum, dtypes=(torch.float32, torch.float64),
    # The output's rows are the offsets' count less one: from the shapes alone (the reference's
    # repeat_interleave sizes its result from the offsets' values, which a fake cannot know).
    fake=lambda src, indptr: src.new_empty((indptr.shape[0] - 1, src.shape[1])),
    registered=torch.ops.torch_scatter.segment_sum_csr, registered_args=lambda src, indptr: (src, indptr, None),
    description="torch_scatter.segment_sum_csr over int64 CSR offsets",
)
