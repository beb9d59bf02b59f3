"""The torch verbs (torch-profile, torch-demo) and the layered trace."""

import json

import pytest

from trnsim.cli.main import main

pytest.importorskip("torch")


def test_torch_profile_eager_json_and_layered_trace(tmp_path, capsys):
    trace = tmp_path / "t.json"
    argv = ["torch-profile", "--batch", "2", "--seq-len", "8", "--d-model", "16",
            "--layers", "1", "--json", "--trace", str(trace)]  # fmt: skip
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total_s"] > 0 and data["fallbacks"] == {}
    mods = {m["module"] for m in data["modules"]}
    assert "GPT.blocks.0.attn" in mods or "GPT.blocks.0.attn.qkv" in mods
    assert all(m["seconds"] >= 0 and 0 <= m["mfu"] <= 1 for m in data["modules"])
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"module", "aten op", "kernel"} <= tracks
    assert any(t.startswith("engine ") for t in tracks)  # instructions of the matmul kernels
    assert not list(tmp_path.glob("*.tmp*"))


def test_torch_demo_tiny_run(tmp_path, capsys):
    png = tmp_path / "loss.png"
    argv = ["torch-demo", "--steps", "3", "--batch", "2", "--seq-len", "8", "--d-model", "16",
            "--layers", "1", "--heads", "2", "--formats", "fp32,mxfp4", "--png", str(png),
            "--json"]  # fmt: skip
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in data["runs"]]
    assert names == ["FP32", "MXFP4", "MXFP4 SR"]
    assert all(len(r["losses"]) == 3 for r in data["runs"])
    fp32 = data["runs"][0]
    assert all(v is None for v in fp32["sqnr_db"].values())  # exact against itself
    mx = data["runs"][1]["sqnr_db"]
    assert all(0 < v < 40 for v in mx.values())  # MXFP4 loses precision (could fail)
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["torch-demo", "--formats", "bogus", "--no-png"], "formats"),
        (["torch-profile", "--model", "llama-3-8b", "--no-files"], "--mode shapes"),
        (["torch-profile", "--mode", "shapes", "--model", "nope", "--no-files"], "nope"),
        (["torch-profile", "--numerics", "fp64", "--no-files"], "numerics"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
