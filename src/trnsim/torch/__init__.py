"""trnsim.torch: PyTorch on a software Trainium3 (the optional extra ``trnsim[torch]``).

Three entry points over one op-level core (``trnsim.torch.mode``):

- **eager**: ``with trnsim.torch.trn3(numerics="mxfp8", rounding="stochastic", timing=True) as
  run:`` around ordinary CPU-tensor code; matmuls compute as the Tensor engine does
  (``trnsim.torch.gemm``), every op is recorded, ``run.profile()`` times them;
- **compiled**: ``torch.compile(model, backend=trnsim.torch.backend(numerics=...))``
  (aot_autograd: forward and backward graphs, the same numerics, fused for timing);
- **shapes only**: ``trnsim.torch.profile_step(model_or_config, inputs, system=...,
  parallel=...)`` under FakeTensorMode, with a fake process group for DTensor / FSDP2 / TP.

Plus NKI kernels as PyTorch ops (``nki_op``, ``custom_op``), a small GPT and a Llama-shaped
model (``trnsim.torch.models``) and the numerics study (``trnsim.torch.study``).

Importing ``trnsim.torch`` does not import PyTorch: each name below loads its module on first
use, and only ``trnsim.torch._door`` imports ``torch`` (with a message naming the extra when it
is missing).
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> module of trnsim.torch that defines it (loaded on first use)
_LAZY: dict[str, str] = {
    "trn3": "mode",
    "Trn3": "mode",
    "to_numpy": "mode",
    "from_numpy": "mode",
    "Numerics": "numerics",
    "NUMERICS": "numerics",
    "numerics": "numerics",
    "gemm": "gemm",
    "TorchOpError": "errors",
    "ExtraMissing": "_door",
    "Profile": "profile",
    "OpRecord": "profile",
    "backend": "compile",
    "profile_step": "step",
    "StepProfile": "step",
    "nki_op": "kernels",
    "custom_op": "kernels",
    "GPT": "models",
    "GPTConfig": "models",
    "Llama": "models",
    "run_study": "study",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"trnsim.torch.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'trnsim.torch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
