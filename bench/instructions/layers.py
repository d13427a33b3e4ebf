"""Where a call's instructions go, by layer: the declared map from callgrind's functions to layers.

Each instruction is counted in the function that ran it (its self cost), and that function names
its layer by the first rule of LAYER_RULES that matches its object file or its name. The C and C++
runtime's helpers (string and memory functions, hashing, mutexes, thread-local lookups: HELPERS)
are not a layer: what a helper runs is counted in the layer of the function that called it, from
callgrind's inclusive cost of that call. What no rule names is `other`, and what a helper ran for
another helper or for no recorded caller is `unattributed`, so a case's layers always add up to its
total.

On Python 3.11 the interpreter runs every Python frame in the same C functions, so the Python code
of a variant, of torch.library and of torch._library.custom_ops is one layer (`python`); the C++
layers are told apart exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dbench.bench.instructions.profile import Function, Profile


@dataclass(frozen=True)
class Rule:
    layer: str
    objects: str | None = None  # regex on the object file's name
    functions: str | None = None  # regex searched in the function's name

    def matches(self, function: Function) -> bool:
        obj, name = function
        return ((self.objects is None or re.search(self.objects, obj) is not None)
                and (self.functions is None or re.search(self.functions, qualified_name(name)) is not None))


_ANONYMOUS = "(anonymous namespace)"


def qualified_name(name: str) -> str:
    """The function's name without its parameter list: a rule names where a function lives, not the
    types it takes (`check_inputs(torch::stable::Tensor const&)` is not the stable ABI's shim). The
    list is the first parenthesis outside template arguments (`function_ref<void (char**)>::f<...>(...)`)."""
    text, depth = name.replace(_ANONYMOUS, "\0"), 0
    for i, char in enumerate(text):
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(depth - 1, 0)
        elif char == "(" and depth == 0:
            text = text[:i]
            break
    return text.replace("\0", _ANONYMOUS)


# The layers, in the order they are shown, with what each holds.
LAYERS: dict[str, str] = {
    "python": "the Python interpreter: every Python frame (the variant's wrappers, torch.library and custom_op "
              "code), Python objects, argument tuples and dicts",
    "binding": "Python <-> C++: pybind11 and torch's Python bindings (argument parsing, IValue conversion, "
               "the Python kernel behind the dispatcher, wrapping the result)",
    "dispatcher": "the C++ dispatcher: operator lookup, dispatch keys, boxing, RecordFunction hooks",
    "shim": "the stable ABI's C shim: StableIValue conversion, torch_call_dispatcher, aoti_torch_* calls",
    "autograd": "autograd: graph nodes, saved tensors, version counters, the engine",
    "state": "thread-local state saved, set and restored: grad mode, autocast, dispatch and function modes",
    "tensors": "tensor objects: creation, metadata, reference counts",
    "allocator": "memory allocation and release",
    "op": "the op's own code: its launcher's checks and output, its kernel (dbench::, ATen's at::native:: "
          "and TensorIterator loops, a user's extension library)",
    "other": "anything no rule names",
    "unattributed": "what helpers ran for other helpers or for no recorded caller",
}

def _names(*prefixes: str) -> str:
    """A regex for names that start with one of the prefixes, also after a return type or inside a
    template's arguments (`void torch::autograd::f<...>`, `std::vector<torch::autograd::Edge>::...`)."""
    return r"(?:^|[ <*&(])(?:" + "|".join(prefixes) + ")"


# First match wins; the order resolves overlaps (at::native::empty_cpu is a tensor's creation, not
# an op kernel; torch::autograd:: functions in libtorch_python are autograd, not binding).
LAYER_RULES: tuple[Rule, ...] = (
    Rule("allocator", objects=r"^libjemalloc|^libtcmalloc"),
    Rule("allocator", functions=_names(r"malloc\b", r"free\b", r"calloc\b", r"realloc\b", "posix_memalign",
                                       "aligned_alloc", "operator new", "operator delete", "c10::alloc_cpu",
                                       "c10::free_cpu", "c10::DefaultCPUAllocator", "c10::ProfiledCPUMemoryReporter",
                                       "c10::profiledCPUMemoryReporter", "c10::memoryProfilingEnabled",
                                       "c10::c10_compute_alignment")),
    Rule("tensors", functions=_names("at::detail::empty", "at::native::empty", "at::empty",
                                     "at::detail::computeStorageNbytes", "at::detail::check_size_nonnegative")),
    Rule("dispatcher", functions=_names(
        "c10::Dispatcher", "c10::OperatorHandle", "c10::impl::OperatorEntry", "c10::KernelFunction",
        "c10::BoxedKernel", "c10::impl::BoxedKernelWrapper", "c10::impl::make_boxed",
        "c10::impl::wrap_kernel_functor", "c10::impl::call_functor", "c10::impl::boxArgs", "at::_ops::",
        "c10::DispatchKeySet", "c10::OperatorName", "c10::IValue", "std::vector<c10::IValue",
        "c10::impl::ExcludeDispatchKeyGuard", "c10::impl::IncludeDispatchKeyGuard",
        "c10::impl::tls_", "c10::impl::PythonDispatcherTLS", "c10::impl::_force_tls_local_dispatch_key_set",
        "c10::computeDispatchKey", "c10::InternedStrings", "c10::Symbol", "at::get_record_function_tls_",
        # RecordFunction: the profiler's hooks, looked up on every dispatched call
        "at::getStepCallbacks", "at::RecordFunction", "at::StepCallbacks",
        r"c10::SmallVectorImpl<at::StepCallbacks",
        r"at::\(anonymous namespace\)::(?:LocalCallbackManager|GlobalCallbackManager|CacheEntry)")),
    Rule("shim", functions=_names("to_ivalue", "from_ivalue", "torch_call_dispatcher", "aoti_torch_",
                                  "torch::stable::")),
    Rule("autograd", functions=_names("torch::autograd::", "THPFunction", "at::sequence_number",
                                      "at::AutoDispatchBelow", "at::AutoGradMode", "c10::AutogradMetaInterface",
                                      "torch::dynamo::autograd")),
    Rule("state", functions=_names(
        "at::ThreadLocalState", "at::autocast::", "c10::AutogradState", "c10::AutoGradMode",
        "c10::impl::TorchDispatchModeTLS", "at::impl::ThreadLocalPythonObjects", "at::impl::PythonTorchFunctionTLS",
        "at::impl::torch_function_mode_enabled",
        "c10::WarningUtils", "c10::tls_debug_info", "c10::ThreadLocalDebugInfo", "at::SavedTensorDefaultHooks",
        "at::functorch::setFuncTorchTLS", "at::functorch::getCopyOfFuncTorchTLS", "at::accelerator::",
        "c10::impl::getGlobalPyInterpreter", "c10::InferenceMode", "c10::GradMode", "at::functorch::",
        r"at::functionalization::impl::\w*TLS", "at::set_dtensor", "at::get_dtensor",
        r"std::deque<std::pair<c10::SafePyObject")),
    Rule("op", functions=_names("dbench::", "at::native::", "at::cpu::", "at::TensorIterator", "at::OperandInfo",
                                "at::internal::serial_for_each", "at::vec::")),
    Rule("binding", objects=r"^libtorch_python\.so"),
    Rule("binding", functions=_names("pybind11::", "THPVariable", "torch::jit::")),
    Rule("tensors", functions=_names("c10::TensorImpl", "at::TensorBase", "at::Tensor::", "c10::intrusive_ptr",
                                     "c10::StorageImpl", "c10::Storage", "caffe2::TypeMeta", "c10::SymInt",
                                     "c10::impl::SizesAndStrides", "c10::TensorOptions", "std::vector<at::Tensor",
                                     "c10::SymBool")),
    # The rest of the op's own libraries: after the rules above, so a pybind11 or tensor function
    # compiled into them is binding or tensors as anywhere else.
    Rule("op", objects=r"^libdbench_|^_dbench_"),
    Rule("python", objects=r"^libpython|^python3|\.cpython-"),
    # A library that is not torch's, Python's or the runtime's is the op's own (a user's extension).
    Rule("op", objects=r"^(?!(?:libtorch|libc10|libshm|libgomp|libiomp|libomp|libmkl|libdnnl|libsleef|libcu|libnv|"
                       r"libjemalloc|libtcmalloc|ld-linux|libc\.so|libstdc\+\+|libgcc_s|libm\.so|libpthread|libz\.|"
                       r"libdl|librt|\?\?\?))"),
)

# The runtime's helpers: their cost goes to the layer of the function that called them.
HELPERS: tuple[Rule, ...] = (
    Rule("helper", objects=r"^(libc\.so|libstdc\+\+\.so|ld-linux|libgcc_s\.so|libm\.so|libpthread\.so)"),
)


def layer_of(function: Function) -> str:
    for rule in LAYER_RULES:
        if rule.matches(function):
            return rule.layer
    return "other"


def is_helper(function: Function) -> bool:
    return any(rule.matches(function) for rule in HELPERS) and layer_of(function) != "allocator"


@dataclass(frozen=True)
class Attribution:
    layers: dict[str, float]  # layer -> Ir (every layer of LAYERS, in its order; they add up to the total)
    functions: dict[Function, tuple[str, float]]  # each function that is not a helper: (its layer, Ir charged)


def _outside_share(profile: Profile) -> dict[Function, float]:
    """Per helper: the share of its calls' inclusive cost that ran outside the runtime (a demangler
    that reallocs, through helpers of its own or directly). Those functions count in their own
    layers, so a helper's caller is charged the rest only. A share comes from the helper's own
    calls (callgrind keeps caller-callee pairs, not stacks): exact where the helper's calls do the
    same work whoever called it."""
    inclusive: dict[Function, int] = {f: ir for f, ir in profile.self_ir.items() if is_helper(f)}
    out: dict[Function, list[tuple[Function, int]]] = {}
    for (caller, callee), ir in profile.calls.items():
        if is_helper(caller) and caller != callee:
            inclusive[caller] = inclusive.get(caller, 0) + ir
            out.setdefault(caller, []).append((callee, ir))
    share: dict[Function, float] = {}

    def outside(helper: Function, seen: frozenset[Function]) -> float:
        if helper in share:
            return share[helper]
        ir = sum(c if not is_helper(callee) else c * (0.0 if callee in seen else outside(callee, seen | {callee}))
                 for callee, c in out.get(helper, []))
        share[helper] = ir / inclusive[helper] if inclusive.get(helper) else 0.0
        return share[helper]

    for helper in inclusive:
        outside(helper, frozenset({helper}))
    return share


def attribute(profile: Profile) -> Attribution:
    """The profile's Ir by layer: each function's self cost in its layer, a helper's in its caller's."""
    charged: dict[Function, float] = {}
    for function, ir in profile.self_ir.items():
        if not is_helper(function):
            charged[function] = charged.get(function, 0) + ir
    share = _outside_share(profile)
    for (caller, callee), ir in profile.calls.items():
        if is_helper(callee) and not is_helper(caller):
            charged[caller] = charged.get(caller, 0) + ir * (1.0 - share.get(callee, 0.0))
    layers = dict.fromkeys(LAYERS, 0.0)
    functions: dict[Function, tuple[str, float]] = {}
    for function, cost in charged.items():
        layer = layer_of(function)
        layers[layer] += cost
        functions[function] = (layer, cost)
    layers["unattributed"] = profile.total - sum(layers.values())
    return Attribution(layers=layers, functions=functions)
