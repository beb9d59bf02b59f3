"""NKI kernels as PyTorch ops, as TorchNeuron's NKI integration runs them on Trainium.

``nki_op(kernel)`` turns an NKI kernel (``@nki.jit`` of the NKI 0.6 API or a legacy
``neuronxcc.nki`` kernel: both resolve to trnsim after ``trnsim.nki.install()``) into a function
of torch tensors: the tensors go to the emulator bit for bit (``trnsim.torch.mode.to_numpy``),
the kernel runs there (``trnsim.nki.run``: every rule checked, exact numerics), and its outputs
come back as torch tensors of the same dtypes. Inside ``trn3(..., timing=True)`` the call is
recorded as one op whose time is the kernel's own instruction stream scheduled by the core
timing model (``trnsim.core.timing.schedule``), so its instructions are the profile's
instruction layer. A failing kernel raises ``TorchOpError`` naming the module, the kernel and
the rule with the kernel's file and line.

``custom_op("lib::name", forward, backward=..., fake=...)`` registers the kernel as a
``torch.library`` custom op (so ``torch.compile`` and FakeTensorMode treat it as one opaque op,
shaped by ``fake``) with ``register_autograd``: ``backward(grad, *inputs)`` (another NKI kernel,
or any function of tensors) returns the gradient of each tensor input.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from trnsim.errors import TrnsimError
from trnsim.torch import _door
from trnsim.torch.errors import TorchOpError
from trnsim.torch.mode import from_numpy, kernel_record, to_numpy
from trnsim.torch.ops import KERNEL_OPS

torch = _door.torch()
_dispatch = _door.submodule("torch.utils._python_dispatch")

_TORCH_OF: dict[str, Any] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "bool": torch.bool,
}


def _kernel_name(kernel: Any) -> str:
    return getattr(kernel, "__name__", None) or type(kernel).__name__


def _to_torch(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        name = x.dtype.name
        if name in _TORCH_OF:
            return from_numpy(x, _TORCH_OF[name])
        if name in ("uint16", "uint32"):  # no unsigned torch dtypes: keep the bits
            return torch.from_numpy(x.astype(np.int64))
        raise TrnsimError(f"a kernel output of dtype {name} has no torch dtype")
    if isinstance(x, tuple | list):
        return type(x)(_to_torch(y) for y in x)
    return x


def _to_emulator(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return np.array(to_numpy(x), copy=True)
    if isinstance(x, tuple | list):
        return type(x)(_to_emulator(y) for y in x)
    return x


def _active_session() -> Any:
    from trnsim.torch.mode import Capture

    for mode in _dispatch._get_current_dispatch_mode_stack():
        if isinstance(mode, Capture):
            return mode.sess
    return None


def nki_op(
    kernel: Any,
    *,
    target: str | None = None,
    rounding: str | None = None,
    seed: int = 0,
    lnc: int | None = None,
) -> Callable[..., Any]:
    """``kernel`` as a function of torch tensors (module docstring)."""
    from trnsim.nki.simulate import run

    name = _kernel_name(kernel)

    def call(*args: Any, **kwargs: Any) -> Any:
        sess = _active_session()
        module = sess.module() if sess is not None else ""
        try:
            with _dispatch._disable_current_modes():  # the bridge is not the model's work
                res = run(
                    kernel,
                    *_to_emulator(args),
                    target=target,
                    lnc=lnc,
                    rounding=rounding,
                    seed=seed,
                    **{k: _to_emulator(v) for k, v in kwargs.items()},
                )
                out = _to_torch(res.outputs)
        except TrnsimError as exc:
            raise TorchOpError(module, f"NKI kernel {name}", str(exc)) from None
        call.last_run = res  # type: ignore[attr-defined]
        if sess is not None and sess.record:
            sess.records.append(kernel_record(sess, name, res, args, out, target))
        return out

    call.__name__ = name
    call.__doc__ = getattr(kernel, "__doc__", None)
    call.kernel = kernel  # type: ignore[attr-defined]
    call.target = target  # type: ignore[attr-defined]
    call.last_run = None  # type: ignore[attr-defined]
    return call


def custom_op(
    qualname: str,
    forward: Any,
    *,
    fake: Callable[..., Any],
    backward: Any = None,
    target: str | None = None,
) -> Any:
    """Register ``forward`` (an NKI kernel) as the custom op ``qualname`` ("lib::name").

    Its tensor inputs are the kernel's parameters without defaults; ``fake(*inputs)`` returns
    an empty tensor of the output's shape and dtype; ``backward(grad, *inputs)`` returns one
    gradient per tensor input (an NKI kernel is wrapped by ``nki_op``). Returns the op
    (``torch.ops.lib.name``)."""
    fn = getattr(forward, "fn", forward)
    params = [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if "::" not in qualname:
        raise TrnsimError(f"custom_op name {qualname!r} must be 'namespace::name'")
    schema = "(" + ", ".join(f"Tensor {p}" for p in params) + ") -> Tensor"
    fwd = nki_op(forward, target=target)

    def impl(*inputs: Any) -> Any:
        return fwd(*inputs)

    op = torch.library.custom_op(qualname, impl, mutates_args=(), schema=schema)
    KERNEL_OPS[qualname] = fwd  # the capture records the kernel's run (mode.Capture)
    op.register_fake(fake)
    if backward is not None:
        bwd = nki_op(backward, target=target) if _is_kernel(backward) else backward

        def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
            ctx.save_for_backward(*inputs)

        def grad_fn(ctx: Any, grad: Any) -> Any:
            grads = bwd(grad.contiguous(), *ctx.saved_tensors)
            return tuple(grads) if isinstance(grads, tuple | list) else grads

        op.register_autograd(grad_fn, setup_context=setup_context)
    return op


def _is_kernel(obj: Any) -> bool:
    from trnsim.nki.simulate import Kernel

    return isinstance(obj, Kernel)
