"""Before/after in one run: a git revision's ``src/`` beside the working tree, for benchmarks
that run the same measurement on both, alternating, in fresh subprocesses.

``tree(rev)`` extracts ``src/`` of ``rev`` (``git archive``) into a temporary directory and
returns the directory to put on ``PYTHONPATH``; ``run_child(script, args, src)`` runs a
benchmark script's child mode under that ``src`` and returns the JSON it prints last.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORKING_SRC = ROOT / "src"


def tree(rev: str) -> Path:
    """``src/`` of git revision ``rev``, extracted into a temporary directory (kept until the
    process exits; the caller's benchmark is short-lived)."""
    blob = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src"],
        capture_output=True,
        check=True,
    ).stdout
    out = Path(tempfile.mkdtemp(prefix=f"trnsim-{rev[:12]}-"))
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(out, filter="data")
    return out / "src"


def label(rev: str) -> str:
    """``rev`` as a short commit hash."""
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", rev],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def run_child(script: Path, args: list[str], src: Path) -> dict[str, Any]:
    """Run ``script args`` with ``src`` first on the module path; its last stdout line is JSON."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, str(script), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{script.name} {' '.join(args)} under {src}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
