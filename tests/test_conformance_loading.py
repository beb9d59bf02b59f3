"""``trnsim conformance`` loading a checkout's kernels: whatever a file does at import or when
called (``SystemExit``, ``KeyboardInterrupt``, an exception whose ``__str__`` raises), the run
records the case's outcome and goes on to the next case; an output element the kernel never
writes is a ``kernel-error`` unless the case says why (``Case.unwritten``)."""

from __future__ import annotations

import numpy as np
import pytest

from trnsim.conformance.case import Case
from trnsim.conformance.runner import checkout_imports, run_case

PATH = "src/nki_samples/tutorials/t/k.py"
HEAD = "import nki\nimport nki.language as nl\n"
COPY = (
    "\n\n@nki.jit\ndef k(x):\n"
    "    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)\n"
    "    nl.store(out[0:1, :], nl.load(x[0:1, :]))\n"
    "    return out\n"
)


def _case(reference=lambda x: x, **kw) -> Case:
    return Case(
        "t/k",
        "nki-samples",
        PATH,
        "k",
        lambda rng: (np.arange(8, dtype=np.float32).reshape(2, 4),),
        reference,
        **kw,
    )


def _run(tmp_path, body: str, case: Case | None = None):
    folder = tmp_path / "src" / "nki_samples" / "tutorials" / "t"
    folder.mkdir(parents=True)
    (folder / "k.py").write_text(body)
    with checkout_imports(tmp_path.resolve(), "nki-samples"):
        return run_case(case or _case(), tmp_path)


@pytest.mark.parametrize(
    "raise_,words",
    [
        ("raise SystemExit(3)", "SystemExit: 3"),
        ("raise KeyboardInterrupt", "KeyboardInterrupt"),
        ("raise GeneratorExit('g')", "GeneratorExit: g"),
        (
            "class E(Exception):\n    def __str__(self):\n        raise ValueError\nraise E()",
            "E: <E whose __str__ raised ValueError>",
        ),
    ],
    ids=["SystemExit", "KeyboardInterrupt", "GeneratorExit", "__str__ raises"],
)
@pytest.mark.parametrize("where", ["import", "call"])
def test_anything_a_library_file_raises_is_the_cases_outcome(tmp_path, raise_, words, where):
    if where == "import":
        body = HEAD + raise_ + "\n" + COPY
    else:
        indented = "\n".join("    " + line for line in raise_.splitlines())
        body = HEAD + "\n\n@nki.jit\ndef k(x):\n" + indented + "\n"
    r = _run(tmp_path, body)
    assert r.outcome == "kernel-error", (r.outcome, r.detail)
    assert words in r.detail, r.detail
    assert r.location.startswith(PATH + ":"), r.location


def test_an_unwritten_output_element_fails_the_case_unless_declared(tmp_path):
    r = _run(tmp_path, HEAD + COPY)
    assert r.outcome == "kernel-error" and "output-unwritten" in r.detail, r.detail
    assert "4 of 8 elements never written" in r.detail


def test_a_case_declares_unwritten_elements(tmp_path):
    # the reference compares what the kernel writes (decode keeps row 0)
    case = _case(
        unwritten="row 1 is padding",
        reference=lambda x: x[0:1],
        decode=lambda out: out[0:1],
    )
    r = _run(tmp_path, HEAD + COPY, case)
    assert r.outcome == "pass", r.detail
