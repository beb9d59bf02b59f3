"""The PyTorch front end's error: what went wrong, in which module and which op."""

from __future__ import annotations

from trnsim.errors import TrnsimError


class TorchOpError(TrnsimError):
    """An op trnsim cannot run as asked: names the ``nn.Module`` (qualified name), the ATen op
    (or the NKI kernel) and the rule broken, e.g. ``GPT.blocks.0.attn: aten::mm: ...``."""

    def __init__(self, module: str, op: str, message: str) -> None:
        self.module = module or "(top level)"
        self.op = op
        self.message = message
        super().__init__(f"{self.module}: {op}: {message}")
