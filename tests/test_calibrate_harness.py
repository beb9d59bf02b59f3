"""The timing calibration harness (``trnsim.conformance.timing``, ``trnsim calibrate``): trace
parsing, the rows as data, checkout discovery, the verb (issue 27, item 8). The rows' errors
themselves are in benchmarks/RESULTS.md (``benchmarks/bench_calibration.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trnsim.conformance import timing as T
from trnsim.conformance.timing_rows import AUTOCOMP_FILES, AUTOCOMP_SCORES, ROWS
from trnsim.core.calibration import TOOLCHAINS
from trnsim.errors import UsageError

CHECKOUTS = Path(os.environ.get("TRNSIM_CHECKOUTS", "/work/checkouts"))


def test_trace_candidates_reads_the_chain_baseline_first_without_running_it(tmp_path):
    trace = tmp_path / "t_trace.py"
    trace.write_text(
        "CodeCandidate(parent=CodeCandidate(parent=None, plan=None, code='''A''', score=2.5,\n"
        "  spad_acc_stats=[]), plan='''p''', code='''B = open('/nonexistent')''', score=1.25)\n"
    )
    assert T.trace_candidates(trace) == ((2.5, "A"), (1.25, "B = open('/nonexistent')"))


def test_rows_are_unique_and_complete():
    names = [r.name for r in ROWS]
    assert len(names) == len(set(names))
    for r in ROWS:
        assert r.measured_s > 0 and r.launches and r.source and len(r.commit) == 40
        assert r.repo in T.CHECKOUT_MARKERS and r.toolchain in TOOLCHAINS
        assert r.target in ("gen2", "gen3", "gen4")
    sets = {r.name.split("/")[0] for r in ROWS}
    assert sets == {"autocomp", "tkf", "sdk"}


def test_find_checkouts_refuses_bad_input(tmp_path):
    with pytest.raises(UsageError, match="not a directory"):
        T.find_checkouts(tmp_path / "nope", {})
    with pytest.raises(UsageError, match="unknown checkout"):
        T.find_checkouts(None, {"mystery": str(tmp_path)})
    with pytest.raises(UsageError, match="not a autocomp checkout"):
        T.find_checkouts(None, {"autocomp": str(tmp_path)})
    assert T.find_checkouts(tmp_path, {}) == {}


def test_mape_counts_only_timed_rows():
    a = T.RowResult("a", "r", "s", "i", "gen2", 1.0, modelled_s=1.1)
    b = T.RowResult("b", "r", "s", "i", "gen2", 2.0, modelled_s=1.0)
    c = T.RowResult("c", "r", "s", "i", "gen2", 2.0, error="kernel-error: x")
    assert T.mape([a, b, c]) == pytest.approx((0.1 + 0.5) / 2)


def test_cli_needs_a_root_and_says_so(capsys):
    from trnsim.cli.main import main

    assert main(["calibrate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give ROOT" in err[0]
    assert main(["calibrate", "--checkout", "autocomp"]) == 2
    assert "expected NAME=PATH" in capsys.readouterr().err


needs_autocomp = pytest.mark.skipif(
    not (CHECKOUTS / "autocomp" / "examples").is_dir(), reason="no autocomp checkout"
)


@needs_autocomp
def test_recorded_scores_are_the_traces_scores():
    for fam, (trace, _) in AUTOCOMP_FILES.items():
        scores = tuple(s for s, _ in T.trace_candidates(CHECKOUTS / "autocomp" / trace))
        assert scores == AUTOCOMP_SCORES[fam], fam


@pytest.mark.slow
@needs_autocomp
def test_a_row_runs_checks_and_times_from_the_checkout(capsys):
    from trnsim.cli.main import main

    code = main(["calibrate", str(CHECKOUTS), "--only", "autocomp/mamba/0", "--json"])
    out = json.loads(capsys.readouterr().out)
    (row,) = out["rows"]
    assert row["check"] == "pass" and row["modelled_s"] > 0 and code == 0
    assert abs(row["rel_error"]) < 0.5
    assert out["mape"] == pytest.approx(abs(row["rel_error"]))


@needs_autocomp
def test_a_damaged_candidate_is_read_from_its_intact_copy_that_differs_only_there():
    import difflib

    from trnsim.conformance.timing_rows import AUTOCOMP_INTACT

    for (fam, i), intact in AUTOCOMP_INTACT.items():
        _, code = T.trace_candidates(CHECKOUTS / "autocomp" / AUTOCOMP_FILES[fam][0])[i]
        whole = (CHECKOUTS / "autocomp" / intact).read_text()

        def lines(text: str) -> list[str]:
            return [ln.rstrip().replace("\\'", "'") for ln in text.strip().splitlines()]

        diff = [
            ln
            for ln in difflib.unified_diff(lines(code), lines(whole), lineterm="", n=0)
            if ln[:1] in "+-" and ln[:3] not in ("+++", "---")
        ]
        # one damaged line in the trace, the same text as two lines in the intact copy
        (old,) = [ln[1:] for ln in diff if ln.startswith("-")]
        new = [ln[1:] for ln in diff if ln.startswith("+")]
        assert len(new) == 2 and old.split() != " ".join(new).split()
        assert old.replace(" ", "") in "".join(new).replace(" ", "").replace("_fmax)", "")
        row = next(r for r in ROWS if r.name == f"autocomp/{fam}/{i}")
        assert row.launches[0].kernel.intact == intact and not row.defect


@needs_autocomp
def test_a_row_whose_trace_code_cannot_have_run_is_reported_with_its_evidence(capsys):
    import ast

    from trnsim.cli.main import main
    from trnsim.conformance.timing_rows import AUTOCOMP_DEFECTS

    undefined = {("mamba", 1): "i_chann", ("mamba", 4): "nchunks"}
    for (fam, i), why in AUTOCOMP_DEFECTS.items():
        _, code = T.trace_candidates(CHECKOUTS / "autocomp" / AUTOCOMP_FILES[fam][0])[i]
        # the stored text fails before any NKI: a parse error, or a name read and never bound
        if (fam, i) not in undefined:
            with pytest.raises(IndentationError):
                compile(code, "candidate", "exec")
            assert "indented" in why
            continue
        name = undefined[fam, i]
        tree = ast.parse(code)
        read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        bound = {
            n.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        } | {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args}
        assert name in read and name not in bound and name in why
    code = main(["calibrate", str(CHECKOUTS), "--only", "autocomp/mamba/5", "--json"])
    out = json.loads(capsys.readouterr().out)
    (row,) = out["rows"]
    assert row["error"].startswith(T.DEFECT + ": the trace's code cannot have run")
    assert row["modelled_s"] is None and out["source_defects"] == 1
    assert out["failed"] == 0 and code == 0
