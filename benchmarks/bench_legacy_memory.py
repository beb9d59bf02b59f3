"""The legacy compiler's memory model, piece by piece (issue 27): for each behaviour, the kernel
that shows it (``tests/test_nki_legacy_memory.py`` and ``tests/test_nki_legacy_repros.py``),
whether it runs and matches NumPy (float64, rtol 1e-5), the bytes it moves (HBM <-> SBUF by
DMA; the memory model's own spill saves and reloads to and from HBM, as neuron-profile's
``spill_save_bytes`` / ``spill_reload_bytes`` count them, refetches of clean tiles, and its PSUM
to SBUF spill copies) and its modelled time on NeuronCore-v2.

Run: ``.venv/bin/python benchmarks/bench_legacy_memory.py`` (a minute or two); ``--src DIR``
runs the same kernels on another checkout's ``src`` (the "before" column of RESULTS.md came from
``git archive 5927374 src | tar -x -C /tmp/before`` and ``--src /tmp/before/src``). Prints a
markdown table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIECES = [  # (behaviour, test module, kernel, input maker)
    ("per-block liveness (r1)", "repros", "two_block_tensors", "r1"),
    ("live tile kept, dead blocks reused (r2)", "repros", "constant_beside_dead_blocks", "r2"),
    ("dead temporaries free their bytes", "repros", "accumulator_beside_temporaries", "lru"),
    ("victim by next use: save + reload", "memory", "far_and_near_tiles", "far"),
    ("clean tile refetched, not saved", "memory", "clean_tile_beside_big_temporaries", "clean"),
    ("PSUM accumulator spilled mid-group", "memory", "nine_accumulators", "nine"),
    ("lazy PSUM zeros: no memset, no spill (t5)", "repros", "lazy_psum_blocks", "t5"),
    ("multi-buffered plain tiles (t6)", "repros", "reciprocal_plain", "t6"),
    ("loop-invariant load hoisted (fits)", "memory", "weights_fit", "wfit"),
    ("loop-invariant load read again (no fit)", "memory", "weights_nofit", "wnofit"),
    ("emitted bmm past SBUF and PSUM", "memory", "emitted_bmm", "bmm"),
]


def _inputs(which: str):
    import numpy as np

    rng = np.random.default_rng(27)

    def ints(*s):
        return rng.integers(-3, 4, s).astype(np.float32)

    w63 = 16128
    return {
        "r1": lambda: (rng.random((32, 128, 1024), dtype=np.float32),),
        "r2": lambda: (ints(2, 44, 128, 1024), ints(128, 128)),
        "lru": lambda: (rng.normal(size=(512, 6144)).astype(np.float32),),
        "far": lambda: (ints(384, w63), ints(128, 512), ints(128, 512)),
        "clean": lambda: (ints(384, w63), ints(128, 1024)),
        "nine": lambda: (ints(128, 128), ints(4, 128, 512)),
        "t5": lambda: (ints(128, 128), ints(16, 128, 512)),
        "t6": lambda: (rng.random((16, 128, 1024), dtype=np.float32) + 1,),
        "wfit": lambda: (ints(8, 128, 2048), ints(128, 1024)),
        "wnofit": lambda: (ints(4, 128, w63), ints(128, 1024)),
        "bmm": lambda: (ints(8, 1024, 512), ints(8, 1024, 2000)),
    }[which]()


def _golden(which: str, args: tuple):
    """NumPy (float64) of each piece's kernel."""
    import numpy as np

    f = [np.asarray(a, np.float64) for a in args]
    if which == "r1":
        return 2 * f[0]
    if which == "r2":
        return f[1][None] + f[0][:, :, :, :128].sum(axis=1)
    if which == "lru":
        a = f[0].reshape(4, 128, -1)
        b = a * 2
        c = b + 1
        d = c * a
        e = d + b
        g = e * 0.5 + c
        return (g - d).sum(0)
    if which in ("far", "clean"):
        xs = f[0].reshape(3, 128, -1)[:, :, :512]
        last = 3 * f[1] + f[2] if which == "far" else f[1][:, :512] + 1
        return np.concatenate([xs * (xs + 1) + (f[2] if which == "far" else 0), last[None]])
    if which == "nine":
        return np.broadcast_to(f[0].T @ f[1].sum(axis=0), (9, 128, 512))
    if which == "t5":
        return np.einsum("km,ikn->imn", f[0], f[1])
    if which == "t6":
        return 1 / f[0]
    if which in ("wfit", "wnofit"):
        xs = f[0][:, :, :512]
        return xs * (xs + 1) + f[1][:, :512]
    return np.einsum("bkm,bkn->bmn", f[0], f[1])


def one(idx: int) -> dict:
    import numpy as np

    import trnsim.nki as tnki

    tnki.install()
    from trnsim.core.timing import schedule
    from trnsim.errors import KernelError
    from trnsim.nki.simulate import record_run, run

    _, module, kernel, which = PIECES[idx]
    path = ROOT / "tests" / f"test_nki_legacy_{module}.py"
    spec = importlib.util.spec_from_file_location(f"piece_{module}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if kernel == "weights_fit" or kernel == "weights_nofit":
        k = mod._weights_in_loop()
    else:
        k = getattr(mod, kernel)
    args = _inputs(which)
    try:
        res = run(k, *args, target="gen2")
        ins = record_run(k, *args, target="gen2").instructions
    except KernelError as e:
        return {"error": f"{e.rule}: {e.message[:70]}"}
    out = np.asarray(res.outputs, np.float64)
    ok = bool(np.allclose(out, _golden(which, args), rtol=1e-5, atol=1e-5))
    by = {"save": 0, "reload": 0, "refetch": 0, "psum": 0}
    load = store = 0
    for i in ins:
        s = i.attr("spill")
        if s is not None and i.opcode.value != "dma_copy":
            by["psum"] += 1  # a PSUM <-> SBUF spill or refill copy
        elif s in by:
            by[s] += i.dst[0].nbytes
        elif i.opcode.value == "dma_copy":
            if i.src[0].memory == "hbm" and i.dst[0].memory == "sbuf":
                load += i.dst[0].nbytes
            elif i.dst[0].memory == "hbm":
                store += i.dst[0].nbytes
    return {
        "ok": ok,
        "load": load,
        "store": store,
        **by,
        "memset": sum(i.opcode.value == "memset" for i in ins),
        "time_s": schedule(ins, "gen2").total_s,
    }


def _child(idx: int, src: str | None) -> dict:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", str(idx)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if res.returncode != 0:
        return {"error": (res.stderr.strip().splitlines() or ["?"])[-1][:90]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--src", default=None, help="run on this src directory (PYTHONPATH)")
    a = ap.parse_args()
    if a.one is not None:
        print(json.dumps(one(a.one)))
        return
    print(
        "| behaviour | kernel | matches NumPy | HBM->SBUF loads MB | stores MB | spill save MB "
        "| reload MB | refetch MB | PSUM spill copies | memsets | modelled time (gen2) |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for idx, (name, _, kernel, _) in enumerate(PIECES):
        r = _child(idx, a.src)
        if "error" in r:
            print(f"| {name} | `{kernel}` | {r['error']} | | | | | | | | |")
            continue
        print(
            f"| {name} | `{kernel}` | {'yes' if r['ok'] else 'WRONG'} | {_mb(r['load'])} | "
            f"{_mb(r['store'])} | {_mb(r['save'])} | {_mb(r['reload'])} | {_mb(r['refetch'])} "
            f"| {r['psum']} | {r['memset']} | {r['time_s'] * 1e6:.1f} us |"
        )


if __name__ == "__main__":
    main()
