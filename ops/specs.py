"""The names of the suite's ops, modes and variants, and what each variant is: plain data.

Torch-free on purpose: run.py validates a command line against these names
before it imports torch or builds anything, so a typo fails in milliseconds.
ops/catalog.py and ops/variants.py build the real objects under these names
(and check that they match).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

OP_NAMES: tuple[str, ...] = ("noop", "muladd", "l2norm", "mm", "chain", "rmsnorm")
# The names of the ops declared in this process so far (ops/declare.py register): a command line
# run in-process after them (dbench.run_scenario) may select them with --ops.
USER_OP_NAMES: list[str] = []
# The folders of the --op files loaded in this process (ops/declare.py load), resolved and as given:
# machine paths that bench.io.env.redact_paths keeps out of result files.
USER_OP_FOLDERS: set[str] = set()

# DBENCH_MM_KERNEL: mm's 16-bit CUDA kernel, read by the kernel layer on every call
# (ops/kernels/cuda_mm.cu: select_kernel). Unset or "auto": the wgmma kernel where it can run
# (an sm_90a build, compute capability 9.0, 16-byte aligned rows), else the mma.sync kernel;
# a kernel's name forces that kernel. `raw().mm_kernel(a, b)` says which one runs.
MM_KERNEL_ENV = "DBENCH_MM_KERNEL"
MM_KERNEL_AUTO = "auto"
MM_KERNELS: tuple[str, ...] = ("wgmma", "mma_sync")


class Mode(str, Enum):
    """How an op is called, in the order of the boundary table's columns. The three forward-only
    modes differ in what the dispatcher does around the kernel: with grad mode on and no input
    requiring grad (`inference`) its Autograd kernels run and record nothing; under
    torch.no_grad() (`no_grad`) the inputs require grad, as a model's parameters do, and nothing is
    recorded either; under torch.inference_mode() (`inference_mode`) the Autograd and
    ADInplaceOrView keys are skipped altogether. A mode's context is entered once around a block of
    calls, as serving code enters it once around many, never inside the timed calls."""

    INFERENCE = "inference"
    NO_GRAD = "no_grad"
    INFERENCE_MODE = "inference_mode"
    FWD_REQUIRES_GRAD = "fwd_requires_grad"
    FWD_BWD = "fwd_bwd"

    @property
    def inputs_require_grad(self) -> bool:
        return self is not Mode.INFERENCE

    @property
    def records_graph(self) -> bool:
        """Whether the forward builds an autograd graph (so the variant must be differentiable)."""
        return self in (Mode.FWD_REQUIRES_GRAD, Mode.FWD_BWD)

    @property
    def context(self) -> str | None:
        """The torch context manager (by its name in torch) the calls run under, if any."""
        return {Mode.NO_GRAD: "no_grad", Mode.INFERENCE_MODE: "inference_mode"}.get(self)


MODES: tuple[str, ...] = tuple(m.value for m in Mode)


def needs_gradient(mode: str) -> bool:
    """Whether a case in `mode` needs the variant's gradient: a Mode that records a graph, or any
    other scenario's mode but inference (the kernel scenarios' forward and backward)."""
    return Mode(mode).records_graph if mode in MODES else mode != Mode.INFERENCE.value


@dataclass(frozen=True)
class VariantSpec:
    name: str
    flavour: str
    wrap: str  # "none" | "function"
    differentiable: bool
    registered: bool  # goes through the dispatcher: compile- and fake-capable
    description: str
    no_grad_reason: str = ""
    native: bool = False  # PyTorch's own op, not our kernels: a comparison row, outside our kernels' contract


# PyTorch's autograd fallback gives such an op's output a grad_fn that only warns
# on backward and drops the op's gradient: there is no correct gradient to time.
_NO_AUTOGRAD = "has no autograd formula: backward through it warns and drops its gradient"
_NO_AUTOGRAD_CUSTOM_OP = "has no autograd formula: backward through it raises"
VARIANT_SPECS: tuple[VariantSpec, ...] = (
    VariantSpec("raw", "raw", "none", False, False, "pybind11 launcher, no dispatcher",
                "launcher outside autograd: its output has no grad_fn (function_raw is its autograd form)"),
    VariantSpec("define_impl", "define_impl", "none", False, True, "torch.library define + impl(CPU/CUDA)",
                "define/impl op " + _NO_AUTOGRAD),
    VariantSpec("custom_op", "custom_op", "none", False, True, "torch.library.custom_op + register_fake",
                "custom_op " + _NO_AUTOGRAD_CUSTOM_OP),
    VariantSpec("custom_op_autograd", "custom_op_autograd", "none", True, True,
                "custom_op + register_autograd"),
    VariantSpec("autograd_key_py", "autograd_key_py", "none", True, True,
                "define/impl + Python kernel at the Autograd key"),
    VariantSpec("function_raw", "raw", "function", True, False, "autograd.Function over the raw launcher"),
    VariantSpec("function_define_impl", "define_impl", "function", True, True,
                "autograd.Function over the define/impl op"),
    VariantSpec("function_custom_op", "custom_op", "function", True, True,
                "autograd.Function over the custom_op"),
    VariantSpec("function_cpp", "cpp", "function", True, True, "autograd.Function over the C++ op"),
    VariantSpec("nested_define_impl", "nested_define_impl", "none", False, True,
                "define/impl op whose impl calls the define/impl op", "nested op " + _NO_AUTOGRAD),
    VariantSpec("nested_custom_op", "nested_custom_op", "none", False, True,
                "custom_op whose body calls the custom_op", "nested custom_op " + _NO_AUTOGRAD_CUSTOM_OP),
    VariantSpec("cpp", "cpp", "none", False, True, "TORCH_LIBRARY def + CPU/CUDA impls",
                "C++ op " + _NO_AUTOGRAD + " (cpp_autograd has one)"),
    VariantSpec("cpp_autograd", "cpp_autograd", "none", True, True,
                "C++ op with a C++ Autograd-key kernel (torch::autograd::Function)"),
    VariantSpec("stable", "stable", "none", False, True, "STABLE_TORCH_LIBRARY + TORCH_BOX",
                "stable-ABI op " + _NO_AUTOGRAD),
    VariantSpec("triton_op", "triton_op", "none", True, True,
                "torch.library.triton_op + wrap_triton, register_autograd"),
    VariantSpec("registered", "registered", "none", True, True,
                "a user's op as its author registered it (torch.ops.ns.name: their TORCH_LIBRARY or Python op)"),
    VariantSpec("aten", "aten", "none", True, True,
                "the native op of the same semantics (clone, addcmul, the composite), autograd by PyTorch: "
                "the floor a registered boundary can aim at", native=True),
)
VARIANT_NAMES: tuple[str, ...] = tuple(s.name for s in VARIANT_SPECS)
SPECS: dict[str, VariantSpec] = {s.name: s for s in VARIANT_SPECS}
