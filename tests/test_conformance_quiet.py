"""``trnsim conformance`` keeps the libraries' own logging off stderr unless ``--verbose``
(nki-library's ``[INFO]`` lines flooded it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trnsim.cli.main import main

NKI_LIBRARY = Path("/work/checkouts/nki-library")
pytestmark = pytest.mark.skipif(not NKI_LIBRARY.is_dir(), reason="no nki-library checkout")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch, tmp_path):
    monkeypatch.setenv("TRNSIM_PROGRESS", "0")
    monkeypatch.delenv("NKILIB_LOG_LEVEL", raising=False)
    monkeypatch.chdir(tmp_path)


def test_library_logging_is_quiet_by_default_and_shown_with_verbose(capsys):
    argv = ["conformance", str(NKI_LIBRARY), "--only", "rmsnorm_tkg"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "[INFO]" not in err and "[INFO]" not in out and "pass" in out
    assert main([*argv, "--verbose"]) == 0
    assert "[INFO]" in capsys.readouterr().err
