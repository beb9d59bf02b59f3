"""``torch.compile(model, backend=trnsim.torch.backend(...))``: whole graphs on a Trainium3.

The backend is ``aot_autograd`` (forward and backward graphs of ATen ops, functionalised);
both graphs run through an ``torch.fx.Interpreter`` under the same dispatch mode as the eager
front end (``trnsim.torch.mode.Capture``), so the numerics are the eager mode's, bit for bit
(tests/test_torch_compile.py: a GPT's loss and every gradient). What compiling adds is
fusion, which changes time, never bits:

Fusion rules. The Neuron compiler's rules are not public in detail; its documentation says
that it fuses an operator with its neighbours (aws-neuron-sdk 81ce03ae
``archive/tensorboard/torch-neuronx-profiling-with-tb.rst``: ``fused_3`` is an input and the
ReLU after it), that TorchNeuron fuses queued operator sequences "based on fusion heuristics"
with the same numerics (``frameworks/torch/pytorch-native-overview.rst``, Adaptive Eager
Execution), and nki-library's kernels fuse norms into the QKV and MLP projections
(``nki/library/api/qkv.rst``, ``mlp.rst``); a matmul's elementwise epilogue runs as the PSUM
result is evacuated to SBUF by the Scalar engine's ``activation`` (NKI ISA). trnsim's rules:

1. a ``vector`` op joins the group of the op that produces one of its inputs when that
   producer is a ``vector`` or ``matmul`` op no other op reads (the intermediate never goes
   to HBM; a forward result saved for the backward has two readers, so it is written);
2. a ``matmul`` never joins a group (each matmul is its own kernel) but may start one (its
   epilogue);
3. views and metadata ops are transparent (a view's readers are its base's readers).

The rules run over the recorded dataflow (``trnsim.torch.profile.fuse``), the same function
``profile_step`` uses.

A group is timed as one kernel (``trnsim.torch.costs``): its matmuls at their own time plus one
vector pass over the bytes entering and leaving the group. Numerics stay op by op (PyTorch's
rounding of each intermediate), so compiled and eager agree exactly; on hardware a fused
epilogue rounds once, which is one reason a real Neuron run can differ in the last bit.
"""

from __future__ import annotations

import re
from typing import Any

from trnsim.core.blas import single_threaded_blas
from trnsim.torch import _door
from trnsim.torch.mode import Capture, Session
from trnsim.torch.numerics import Numerics
from trnsim.torch.numerics import numerics as resolve_numerics
from trnsim.torch.profile import OpRecord, fuse

torch = _door.torch()
_fx = _door.submodule("torch.fx")
_common = _door.submodule("torch._dynamo.backends.common")


_PATH = re.compile(r"\[(\d+)\]")


def _module_of(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    path = path.replace("L['self'].", "").replace("L['self']", "")
    path = re.sub(r"L\['([^']+)'\]", r"\1", path)
    path = _PATH.sub(r".\1", path).replace("._modules", "")
    return re.sub(r"\['([^']+)'\]", r".\1", path).strip(".")


class _Interpreter(_fx.Interpreter):
    """Runs a graph node by node, telling the session each node's module and phase."""

    def __init__(self, gm: Any, sess: Session, phase: str) -> None:
        super().__init__(gm)
        self.sess, self.phase = sess, phase

    def run_node(self, n: Any) -> Any:
        sess = self.sess
        sess.module_override = _module_of(n)
        sess.phase_override = self.phase
        try:
            return super().run_node(n)
        finally:
            sess.module_override = None


class Backend:
    """A ``torch.compile`` backend; ``records`` and ``profile()`` cover every graph run."""

    def __init__(self, policy: Numerics, timing: bool, fuse: bool) -> None:
        self.policy = policy
        self.timing = timing
        self.fuse = fuse
        self.session = Session(policy, record=timing)
        self.graphs: list[Any] = []
        self._aot = _common.aot_autograd(
            fw_compiler=self._compiler("forward"), bw_compiler=self._compiler("backward")
        )

    def _compiler(self, phase: str):
        def compile_graph(gm: Any, example_inputs: Any) -> Any:
            self.graphs.append(gm)

            def run(args: list) -> Any:
                with single_threaded_blas(), Capture(self.session):
                    return _Interpreter(gm, self.session, phase).boxed_run(args)

            run._boxed_call = True  # type: ignore[attr-defined]
            return run

        return compile_graph

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        return self._aot(gm, example_inputs)

    @property
    def records(self) -> list[OpRecord]:
        return self.session.records

    def profile(self, **kw: Any):
        """The ``Profile`` of every graph run so far (needs ``timing=True``), fused by the
        rules of the module docstring unless ``fuse=False``."""
        from trnsim.errors import TrnsimError
        from trnsim.torch.costs import time_records

        if not self.timing:
            raise TrnsimError("this backend was not timed: use backend(..., timing=True)")
        if self.fuse:
            fuse(self.records)
        return time_records(self.records, numerics=self.policy, **kw)


def backend(
    numerics: str | Numerics = "native",
    *,
    rounding: str | None = None,
    seed: int | None = None,
    timing: bool = False,
    fuse: bool = True,
) -> Backend:
    """A ``torch.compile`` backend running graphs with trnsim's numerics (module docstring)."""
    return Backend(resolve_numerics(numerics, rounding=rounding, seed=seed), timing, fuse)
