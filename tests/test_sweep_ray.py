"""Ray, for real: one local runtime on 127.0.0.1 for this module runs a small sweep, a small
tune and a 4-rank collective kernel (each rank in a Ray actor), each equal to the serial path
bit for bit. Ray starts slowly (seconds): every Ray test lives here, on one runtime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the ray extra (pip install -e '.[ray]')")

from trnsim import extras  # noqa: E402
from trnsim.cli.main import main  # noqa: E402
from trnsim.errors import KernelError  # noqa: E402
from trnsim.nki import collectives as ncc  # noqa: E402
from trnsim.nki import isa as nisa  # noqa: E402
from trnsim.nki import language as nl  # noqa: E402
from trnsim.nki.ray_ranks import RayRanks, RemoteCore  # noqa: E402
from trnsim.nki.simulate import jit, run_ranks  # noqa: E402

MATMUL = str(Path(__file__).resolve().parents[1] / "examples" / "kernels" / "matmul.py")


@pytest.fixture(scope="module")
def runtime():
    """A local Ray runtime of 2 CPUs on 127.0.0.1, no dashboard, for this module only."""
    assert not ray.is_initialized()
    rt, started = extras.connect(None, num_cpus=2)  # address="local" on 127.0.0.1
    assert started and rt.cluster_resources()["CPU"] == 2
    assert rt.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    yield rt
    extras.shutdown(ray)


SPEC = {
    "verb": "train",
    "fixed": {"model": "llama-3.1-8b", "system": "trn3-gen2", "chips": 64},
    "grid": {"tp": [1, 2, 3], "precision": ["bf16", "fp8"]},
}


def test_a_sweep_on_ray_gives_the_serial_table(runtime, tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(SPEC))
    tables = {}
    for name, flags in (("serial", ["--serial"]), ("ray", ["--ray"])):
        out = tmp_path / f"{name}.parquet"
        assert main(["sweep", str(spec), "--out", str(out), "--json", *flags]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["backend"] == name and doc["ran"] == 6
        tables[name] = out
    import pyarrow.parquet as pq

    serial, on_ray = (pq.read_table(tables[k]) for k in ("serial", "ray"))
    assert serial.equals(on_ray)
    statuses = serial.column("status").to_pylist()
    assert statuses.count("invalid") == 2 and statuses.count("ok") == 4


def test_a_tune_on_ray_matches_the_serial_path(runtime, capsys):
    argv = ["tune", MATMUL, "--param", "TILES_IN_BLOCK_M=2,3,4", "--param",
            "TILES_IN_BLOCK_N=1,2", "--json"]  # fmt: skip
    docs = {}
    for name, flags in (("serial", ["--serial"]), ("ray", ["--ray"])):
        assert main([*argv, *flags]) == 0
        docs[name] = json.loads(capsys.readouterr().out)
    assert docs["ray"]["backend"] == "ray"
    assert docs["ray"]["candidates"] == docs["serial"]["candidates"]
    assert docs["ray"]["best"] == docs["serial"]["best"]
    assert sum(c["status"] == "failed" for c in docs["ray"]["candidates"]) == 2


RING = ncc.ReplicaGroup([[0, 1, 2, 3]])


@jit
def reduce_then_gather(x):
    """All-reduce four ranks' shards, then all-gather the sums (two collectives)."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    ncc.all_reduce(srcs=[t], dsts=[s], replica_group=RING, op=nl.add)
    g = nl.ndarray((x.shape[0], 4 * x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    ncc.all_gather(srcs=[s], dsts=[g], replica_group=RING, collective_dim=1)
    out = nl.ndarray(g.shape, dtype=g.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=g)
    return out


@jit
def rank_one_breaks_a_rule(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if ncc.rank_id() == 1:
        nl.ndarray((256, 4), dtype=x.dtype, buffer=nl.sbuf)  # 256 partitions: illegal
    ncc.all_reduce(srcs=[t], dsts=[t], replica_group=RING, op=nl.add)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@jit
def joins_one_collective_too_few(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if ncc.rank_id() != 2:
        ncc.all_reduce(srcs=[t], dsts=[t], replica_group=RING, op=nl.add)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _shards():
    rng = np.random.default_rng(5)
    return [rng.standard_normal((16, 32)).astype(np.float32) for _ in range(4)]


def test_four_ranks_in_ray_actors_equal_the_in_process_run(runtime):
    xs = _shards()
    here = run_ranks(reduce_then_gather, [((x,), {}) for x in xs])
    there = run_ranks(reduce_then_gather, [((x,), {}) for x in xs], backend=RayRanks())
    assert len(there) == 4
    total = xs[0] + xs[1] + xs[2] + xs[3]
    for h, t in zip(here, there, strict=True):
        assert t.outputs.dtype == h.outputs.dtype and t.outputs.tobytes() == h.outputs.tobytes()
        assert t.instructions == h.instructions and len(t.instructions) > 0
        assert t.printed == h.printed
        assert all(isinstance(c, RemoteCore) for c in t.cores)
        assert [c.spec for c in t.cores] == [c.spec for c in h.cores]
    assert np.allclose(there[0].outputs[:, :32], total, rtol=1e-6)


def test_the_failing_rank_s_error_is_raised_as_in_process(runtime):
    xs = _shards()
    with pytest.raises(KernelError) as here:
        run_ranks(rank_one_breaks_a_rule, [((x,), {}) for x in xs])
    with pytest.raises(KernelError) as there:
        run_ranks(rank_one_breaks_a_rule, [((x,), {}) for x in xs], backend=RayRanks())
    assert str(there.value) == str(here.value) and "256" in str(there.value)
    assert (there.value.rule, there.value.kernel_line) == (here.value.rule, here.value.kernel_line)


def test_a_rank_that_ends_without_joining_a_collective_stops_the_others(runtime):
    """In threads the other ranks would wait for it at the barrier; across actors the mailbox
    knows the rank ended and says so."""
    xs = _shards()
    with pytest.raises(KernelError, match=r"ranks \[2\] did not join collective #0"):
        run_ranks(joins_one_collective_too_few, [((x,), {}) for x in xs], backend=RayRanks())
