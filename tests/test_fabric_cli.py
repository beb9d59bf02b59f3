"""The ``collective`` verb: output, JSON keys, sweep table and plot, errors."""

from __future__ import annotations

import json
import re

import pytest

from trnsim.cli.collective import parse_size
from trnsim.cli.main import main
from trnsim.errors import ConfigError


@pytest.mark.parametrize(
    "text,value", [("1GiB", 2**30), ("64KiB", 65536), ("1e6", 1e6), ("2 GB", 2e9), ("512", 512)]
)
def test_sizes(text, value):
    assert parse_size(text) == value


def test_bad_size_names_the_units():
    with pytest.raises(ConfigError, match="KiB, MiB"):
        parse_size("1 parsec")


def test_json_has_si_keys_and_nccl_busbw(capsys):
    argv = ["collective", "--op", "all-reduce", "--system", "trn3-gen2", "--ranks", "144",
            "--size", "1GiB", "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("time_s", "algbw_Bps", "busbw_Bps", "algo", "breakdown", "steps", "nbytes"):
        assert key in out
    assert out["nbytes"] == 2**30
    assert out["busbw_Bps"] == pytest.approx(out["algbw_Bps"] * 2 * 143 / 144)


def test_forced_algorithm_and_table(capsys):
    assert main(["collective", "--op", "allgather", "--ranks", "16", "--algo", "ring"]) == 0
    out = capsys.readouterr().out
    assert "busbw" in out and "ring" in out


def test_sweep_prints_table_and_writes_png(tmp_path, capsys):
    png = tmp_path / "sweep.png"
    argv = ["collective", "--op", "a2a", "--system", "trn2-ultraserver", "--sweep",
            "--plot", str(png)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "1,024" in out and "1,073,741,824" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_flow_evaluator(capsys):
    argv = ["collective", "--op", "all-to-all", "--ranks", "144", "--size", "64MiB",
            "--evaluator", "flow", "--json"]  # fmt: skip
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["evaluator"] == "flow"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--op", "allsum"], "unknown collective op 'allsum'"),
        (["--system", "trn9"], "unknown system preset 'trn9'"),
        (["--algo", "butterfly"], "unknown collective algorithm 'butterfly'"),
        (["--system", "tpu-v7-pod", "--ranks", "10000"], r"ranks \(10000\) exceed"),
    ],
)
def test_errors_exit_2_with_the_rule(argv, message, capsys):
    assert main(["collective", *argv]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_ranks_beyond_a_compute_tray_join_over_the_racks_nvlink(capsys):
    """A GB200 compute tray's 4 GPUs sit in the rack's 72-GPU NVLink domain: 8 ranks join two
    trays over NVLink, which is what the model times (the note said InfiniBand before)."""
    assert main(["collective", "--op", "all-reduce", "--system", "gb200-tray", "--ranks", "8"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "over its nvswitch level 'nvlink'" in err and "infiniband" not in err
    assert main(["collective", "--op", "all-reduce", "--system", "dgx-h100", "--ranks", "16"]) == 0
    assert "scale-out level 'infiniband'" in " ".join(capsys.readouterr().err.split())
