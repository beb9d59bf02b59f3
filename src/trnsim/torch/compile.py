"""``torch.compile(model, backend=trnsim.torch.backend(...))``: whole graphs on a Trainium3.

The backend is ``aot_autograd`` (forward and backward graphs of ATen ops, functionalised);
both graphs run through an ``torch.fx.Interpreter`` under the same dispatch mode as the eager
front end (``trnsim.torch.mode.Capture``), so the numerics are the eager mode's, bit for bit
(tests/test_torch_compile.py: a GPT's loss and every gradient). What compiling adds is
fusion, which changes time, never bits:

Fusion rules (the Neuron compiler's, as its documentation describes them: elementwise and
normalisation ops are fused into one Vector/Scalar-engine pass, and a matmul's elementwise
epilogue runs as the PSUM result is evacuated to SBUF by the Scalar engine's ``activation``):

1. a ``vector`` op joins the group of the op that produces one of its inputs when that
   producer is a ``vector`` or ``matmul`` op with no other user (the intermediate never goes
   to HBM);
2. a ``matmul`` never joins a group (each matmul is its own kernel) but may start one (its
   epilogue);
3. views and metadata ops are transparent (their users count as the producer's users).

A group is timed as one kernel (``trnsim.torch.costs``): its matmuls at their own time plus one
vector pass over the bytes entering and leaving the group. Numerics stay op by op (PyTorch's
rounding of each intermediate), so compiled and eager agree exactly; on hardware a fused
epilogue rounds once, which is one reason a real Neuron run can differ in the last bit.
"""

from __future__ import annotations

import re
from typing import Any

from trnsim.torch import _door
from trnsim.torch.mode import Capture, Session
from trnsim.torch.numerics import Numerics
from trnsim.torch.numerics import numerics as resolve_numerics
from trnsim.torch.ops import classify
from trnsim.torch.profile import OpRecord

torch = _door.torch()
_fx = _door.submodule("torch.fx")
_common = _door.submodule("torch._dynamo.backends.common")


def _kind(node: Any) -> str:
    if node.op != "call_function" or not hasattr(node.target, "_schema"):
        return "free"
    t = node.target
    return classify(t._schema.name, [x.name for x in t.tags], t.is_view)


def fusion_groups(graph: Any) -> dict[Any, int]:
    """node -> group id under the rules of the module docstring (unfused nodes absent)."""
    group: dict[Any, int] = {}
    kinds = {n: _kind(n) for n in graph.nodes}
    next_id = 0

    def real_users(n: Any) -> list[Any]:
        out = []
        for u in n.users:
            if kinds.get(u) == "free":
                out.extend(real_users(u))
            else:
                out.append(u)
        return out

    def producer(n: Any) -> Any:
        while n is not None and kinds.get(n) == "free" and n.op == "call_function":
            ins = [a for a in n.all_input_nodes]
            n = ins[0] if len(ins) == 1 else None
        return n

    for n in graph.nodes:
        if kinds[n] != "vector":
            continue
        for a in n.all_input_nodes:
            p = producer(a)
            if p is None or kinds.get(p) not in ("vector", "matmul"):
                continue
            if len(real_users(p)) != 1:
                continue
            if p not in group:
                group[p] = next_id
                next_id += 1
            group[n] = group[p]
            break
    return group


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
    def __init__(self, gm: Any, sess: Session, groups: dict[Any, int], base: int, phase: str):
        super().__init__(gm)
        self.sess, self.groups, self.base, self.phase = sess, groups, base, phase

    def run_node(self, n: Any) -> Any:
        g = self.groups.get(n)
        sess = self.sess
        sess.module_override = _module_of(n)
        sess.group = -1 if g is None else self.base + g
        sess.kernel = "" if g is None else f"fused {self.phase} group {g}"
        sess.phase_override = self.phase
        try:
            return super().run_node(n)
        finally:
            sess.module_override = None
            sess.group, sess.kernel = -1, ""


class Backend:
    """A ``torch.compile`` backend; ``records`` and ``profile()`` cover every graph run."""

    def __init__(self, policy: Numerics, timing: bool, fuse: bool) -> None:
        self.policy = policy
        self.timing = timing
        self.fuse = fuse
        self.records: list[OpRecord] = []
        self.graphs: list[Any] = []
        self._groups = 0
        self._aot = _common.aot_autograd(
            fw_compiler=self._compiler("forward"), bw_compiler=self._compiler("backward")
        )

    def _compiler(self, phase: str):
        def compile_graph(gm: Any, example_inputs: Any) -> Any:
            self.graphs.append(gm)
            groups = fusion_groups(gm.graph) if self.fuse else {}
            base = self._groups
            self._groups += len(set(groups.values()))

            def run(args: list) -> Any:
                sess = Session(self.policy, record=self.timing)
                sess.records = self.records
                sess.group_base = base
                with Capture(sess):
                    return _Interpreter(gm, sess, groups, base, phase).boxed_run(args)

            run._boxed_call = True  # type: ignore[attr-defined]
            return run

        return compile_graph

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        return self._aot(gm, example_inputs)

    def profile(self, **kw: Any):
        """The ``Profile`` of every graph run so far (needs ``timing=True``)."""
        from trnsim.errors import TrnsimError
        from trnsim.torch.costs import time_records

        if not self.timing:
            raise TrnsimError("this backend was not timed: use backend(..., timing=True)")
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
