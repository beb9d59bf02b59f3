"""``trnsim microbench``: single-chip GEMM, STREAM and attention rates; the Trainium figures come
from real NKI kernels timed by the core timing model, the peers' from their stacks' profiles."""

import json

import numpy as np
import pytest

from trnsim.cli.main import main
from trnsim.nki.kernelfile import load_module
from trnsim.perf import microbench as mb


def _kernel(name):
    return load_module(str(mb._KERNELS / name))


@pytest.mark.parametrize("target", ["gen2", "gen4"])
@pytest.mark.parametrize("kernel", ["attention_fwd", "attention_full"])
def test_attention_kernel_matches_its_golden(target, kernel):
    from trnsim.nki.simulate import run

    mod = _kernel("attention_fwd.py")
    q, k, v = mod.make_inputs(np.random.default_rng(1), S=1024, d=64)
    bf16_psum = target != "gen2"  # NeuronCore-v2's PSUM holds no bf16
    out = run(getattr(mod, kernel), q, k, v, target=target, bf16_psum=bf16_psum).outputs
    want = getattr(mod, f"golden_{kernel}")(q, k, v).astype(np.float32)
    assert np.allclose(np.asarray(out, np.float32), want, rtol=2e-2, atol=2e-2)


def test_stream_kernel_matches_its_golden():
    from trnsim.nki.simulate import run

    mod = _kernel("stream.py")
    b, c = mod.make_inputs(np.random.default_rng(2), rows=256, cols=512)
    out = run(mod.stream_triad, b, c, target="gen3").outputs
    assert np.allclose(np.asarray(out), mod.golden(b, c), rtol=1e-6, atol=1e-6)


def test_nki_tutorial_gemm_on_one_neuroncore_v2():
    # trainium.md A: [4096, 8192] x [8192, 8192] bf16, fully optimized: 6.97 ms
    r = mb.gemm(mb.resolve_target("neuroncore-v2"), 4096, 8192, 8192)
    assert r.published is not None and abs(r.error) < 0.1
    assert r.rate < r.peak  # never above the published peak
    assert "core timing model" in r.model


def test_trainium_chip_gemm_is_timed_on_all_cores_below_the_peak():
    core = mb.gemm(mb.resolve_target("neuroncore-v4"), 2048, 2048, 2048)
    chip = mb.gemm(mb.resolve_target("trn3"), 2048, 2048, 2048)
    assert chip.rate < chip.peak and core.rate < core.peak
    assert chip.rate > 4 * core.rate  # 8 cores, each a quarter-width share of N
    fp8 = mb.gemm(mb.resolve_target("trn2"), 2048, 2048, 2048, "fp8")
    bf16 = mb.gemm(mb.resolve_target("trn2"), 2048, 2048, 2048, "bf16")
    assert fp8.rate > 1.3 * bf16.rate and "double-row" in fp8.model


def test_stream_shares_the_chips_hbm():
    one = mb.stream(mb.resolve_target("trn2"))
    assert 0 < one.rate <= one.peak  # at most the chip's HBM bandwidth


def test_h100_rows_are_reported_against_peers_g():
    t = mb.resolve_target("h100-sxm")
    rows = [mb.gemm(t, s, s, s, "fp8") for s in (1024, 2048, 4096, 8192)]
    assert all(r.error is not None and abs(r.error) < 0.25 for r in rows)
    assert all("GEMM surface of Hopper (fitted to these" in r.model for r in rows)
    st = mb.stream(t)
    assert st.error == pytest.approx(0.0, abs=0.01) and "stated" in st.model


def test_bad_shapes_are_refused():
    t = mb.resolve_target("h100-sxm")
    with pytest.raises(Exception, match="multiple of 128"):
        mb.gemm(t, 1000, 1024, 1024)
    with pytest.raises(Exception, match="no chip or NeuronCore"):
        mb.resolve_target("nosuch")
    with pytest.raises(Exception, match="multiple of 512"):
        mb.Attention(seq=1000)


def test_cli_json_and_png(tmp_path, capsys):
    png = tmp_path / "mb.png"
    rc = main(["microbench", "h100-sxm", "--sizes", "1024", "--json", "--png", str(png)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and png.stat().st_size > 0
    rows = {(r["bench"], r["dtype"]): r for r in doc["results"]}
    assert rows[("stream", "fp32")]["unit"] == "B/s"
    assert rows[("gemm", "fp8")]["published"] == 274e12


@pytest.mark.parametrize(
    "argv, words",
    [
        (["nosuch"], "no chip or NeuronCore"),
        (["--bench", "gem"], "valid benchmarks"),
        (["--sizes", "100"], "multiples of 128"),
        (["--dtype", "mxfp4"], "valid dtypes"),
        (["--seq", "1000"], "multiple of 512"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(argv, words, capsys):
    try:
        rc = main(["microbench", *argv])
    except SystemExit as exc:  # argparse's own refusals
        rc = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and words in err[0]
