"""torch's own Python functions on a call's path, each counted inclusively in a window of its own.

On Python 3.11 callgrind sees every Python frame as the same C functions of the interpreter, so the
`python` layer cannot be split by function from a dump. Instead the measured process (child.py)
counts, for each case, each declared function it calls in a separate window: the function is
replaced, where its callers look it up, by a wrapper that switches callgrind's collection on for
the outermost call into it and off when that call returns, so the window's instructions are the
function's inclusive cost (its Python frames and all the C++ beneath them) over the case's calls.
The wrapper's own instructions inside the window are measured once on a function that does
nothing (`calibration`) and taken off per call into the function.

A function is found only where it is looked up at call time, as the declared module's attribute:
one that a caller imported into its own namespace is missed there, and a case whose counting pass
makes no call into it has no window (its calls are 0, not a guess).
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any, Callable

# The functions a breakdown counts apart, by the name its table shows: "module:attribute[.attribute]",
# where the callers on a registered op's path look it up (torch 2.11-2.13).
PYTHON_FUNCTIONS: dict[str, str] = {
    "OpOverloadPacket.__call__": "torch._ops:OpOverloadPacket.__call__",
    "OpOverload.__call__": "torch._ops:OpOverload.__call__",
    "OpOverload.redispatch": "torch._ops:OpOverload.redispatch",
    "CustomOpDef.__call__": "torch._library.custom_ops:CustomOpDef.__call__",
    "Function.apply": "torch.autograd.function:Function.apply",
    "fill_defaults": "torch._library.utils:fill_defaults",
    "_c_check_aliasing_constraint": "torch._library.utils:_c_check_aliasing_constraint",
    "unwrap_dead_wrappers": "torch._functorch.utils:unwrap_dead_wrappers",
    "tree_flatten": "torch.utils._pytree:tree_flatten",
}


@dataclass
class Hook:
    """One declared function, replaceable where its callers look it up."""

    name: str
    owner: Any  # the module or class that holds it
    attribute: str
    original: Any  # as the owner holds it (a classmethod stays one)

    @staticmethod
    def find(name: str, where: str) -> "Hook | None":
        """None where this torch does not have it (the table then has no such line)."""
        module_name, _, path = where.partition(":")
        try:
            owner: Any = importlib.import_module(module_name)
            *parents, attribute = path.split(".")
            for parent in parents:
                owner = getattr(owner, parent)
            original = inspect.getattr_static(owner, attribute)
        except (ImportError, AttributeError):
            return None
        return Hook(name, owner, attribute, original)

    def install(self, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        """Replace it with wrap(its function); a classmethod's function is wrapped and stays a classmethod."""
        if isinstance(self.original, classmethod):
            setattr(self.owner, self.attribute, classmethod(wrap(self.original.__func__)))
        else:
            setattr(self.owner, self.attribute, wrap(self.original))

    def restore(self) -> None:
        setattr(self.owner, self.attribute, self.original)


def hooks() -> list[Hook]:
    return [h for h in (Hook.find(name, where) for name, where in PYTHON_FUNCTIONS.items()) if h is not None]


class Window:
    """Wraps a function so that collection is on only inside its outermost calls (while armed)."""

    def __init__(self, toggle: Callable[[], Any]) -> None:
        self.toggle = toggle
        self.armed = False
        self.depth = 0
        self.calls = 0  # outermost calls while armed

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        window = self

        def windowed(*args: Any, **kwargs: Any) -> Any:
            if not window.armed:
                return function(*args, **kwargs)
            window.depth += 1
            if window.depth == 1:
                window.calls += 1
                window.toggle()
            try:
                return function(*args, **kwargs)
            finally:
                window.depth -= 1
                if window.depth == 0:
                    window.toggle()

        return windowed


def count_calls(call: Callable[[], Any], context: Callable[[], Any] | None, found: list[Hook],
                repeat: int = 3) -> dict[str, float]:
    """Outermost calls into each function per call of the case (uninstrumented: the counting pass)."""
    from contextlib import nullcontext

    windows = {h.name: Window(lambda: None) for h in found}
    for hook in found:
        hook.install(windows[hook.name].wrap)
    try:
        with context() if context is not None else nullcontext():
            call()  # a first call's one-off work (a cache filled) is not a call's
            for window in windows.values():
                window.armed = True
            for _ in range(repeat):
                call()
    finally:
        for hook in found:
            hook.restore()
    return {name: w.calls / repeat for name, w in windows.items() if w.calls}
