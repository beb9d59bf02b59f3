"""Demo section: PyTorch on Trainium3 (``trnsim.torch``; skipped without the torch extra)."""

from __future__ import annotations

from rich.console import Console


def section(console: Console) -> None:
    from trnsim.torch import _door

    if not _door.available():
        # the text holds '[torch]', which rich would read as markup and drop
        console.print(f"skipped: PyTorch is not installed ({_door.INSTALL})", markup=False)
        return
    import numpy as np

    import trnsim.torch as tt
    from trnsim.perf import ParallelPlan
    from trnsim.torch.models import GPT, GPTConfig, batches, corpus, encode
    from trnsim.workloads import ModelArgs

    torch = _door.torch()
    cfg = GPTConfig(d_model=32, n_layers=1, n_heads=2, seq_len=16)
    x, y = next(batches(encode(corpus(5000)), 4, cfg.seq_len))
    with torch.no_grad():
        ref = float(GPT(cfg)(x, y))
    for policy in ("bf16", "mxfp4"):
        model = GPT(cfg)
        with tt.trn3(policy, rounding="stochastic", timing=True) as run:
            loss = model(x, y)
            loss.backward()
        prof = run.profile()
        value = float(loss.detach())
        console.print(
            f"small GPT, {policy:5} with stochastic rounding: loss {value:.5f} (fp32 "
            f"PyTorch {ref:.5f}); one NeuronCore-v4: {prof.total_s * 1e6:.0f} us for "
            f"{len(prof.records)} ATen ops, fallbacks {len(prof.fallbacks)}"
        )
    a, b = torch.randn(200, 300), torch.randn(300, 70)
    with tt.trn3("mxfp8"):
        c = a @ b
    err = float((c - a @ b).abs().max() / (a @ b).abs().max())
    console.print(f"torch.mm under MXFP8 (NKI scale rule, fp32 PSUM): max rel error {err:.2e}")
    tiny = ModelArgs("tiny-llama", d_model=256, n_layers=2, n_heads=8, n_kv_heads=4, d_ff=512,
                     vocab=1024)  # fmt: skip
    step = tt.profile_step(tiny, system="trn3-gen1", seq_len=256, global_batch=4,
                           parallel=ParallelPlan(tp=2, dp=2, zero=3))  # fmt: skip
    colls = sorted({r.collective[0] for r in step.profile.records if r.collective})
    console.print(
        f"shapes only, tiny Llama on a fake process group (TP 2 x FSDP2 2): step "
        f"{step.step_time_s * 1e3:.3f} ms, collectives captured: {', '.join(colls)} "
        f"({np.round(step.wall_s, 1)} s)"
    )
