"""One small replica's scheduler limits for the policy tests (``test_serve_*_policy.py``):
each test file names its policy and form and overrides what its behaviour needs."""

from __future__ import annotations

from trnsim.serve.engine import Limits


def make_limits(policy: str, form: str, **kw) -> Limits:
    base = dict(
        policy=policy,
        form=form,
        max_num_seqs=8,
        max_num_batched_tokens=64,
        max_model_len=4096,
        block_size=16,
        prefix_caching=False,
        num_blocks=1000,
        chunked_prefill=True,
        long_prefill_token_threshold=0,
        prefill_buckets=None,
        batch_buckets=None,
        context_buckets=None,
        max_kv_concurrent=8,
        sampling="device",
        async_scheduling=False,
        kv_bytes_per_token=1.0,
    )
    base.update(kw)
    return Limits(**base)
