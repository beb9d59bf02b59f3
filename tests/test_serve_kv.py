"""The KV cache's blocks, prefix hits and LRU eviction, from vLLM's documented behaviour:
vllm-project/vllm ``docs/design/prefix_caching.md`` @ 01ff8bff (its worked example, block size
4, ten blocks) and ``vllm/v1/core/kv_cache_manager.py`` @ 003df296 (``get_computed_blocks``)."""

from __future__ import annotations

import pytest

from trnsim.errors import ConfigError
from trnsim.serve.kv import Holding, KVCache, chain_keys

# Token ids of the doc's requests: one hash id per token (hash_block 1), so equal prefixes
# are equal ids.
REQ0 = tuple(range(15))
REQ1 = (*tuple(range(10)), 100, 101, 102, 103)
REQ2 = tuple(range(12)) + tuple(200 + i for i in range(17))


def doc_cache() -> KVCache:
    # The doc's blocks 0..9 are ids 1..10 here: id 0 is vLLM's null block.
    return KVCache(11, 4, prefix_caching=True)


def admit(kv: KVCache, ids: tuple[int, ...]) -> tuple[Holding, list[int]]:
    h = Holding()
    hits, _ = kv.lookup(h, ids, 1, len(ids))
    kv.allocate(h, len(ids), hits)
    kv.register(h, len(ids))
    return h, hits


def doc(ids: list[int]) -> list[int]:
    return [b - 1 for b in ids]


def test_the_prefix_caching_example_of_vllms_design_doc():
    kv = doc_cache()
    # Time 1: request 0, 15 prompt tokens: 4 blocks, 3 full and cached.
    h0, hits = admit(kv, REQ0)
    assert hits == [] and doc(h0.ids) == [0, 1, 2, 3]
    # Time 3: its block 3 fills; the next token takes block 4.
    kv.allocate(h0, 17)
    assert doc(h0.ids) == [0, 1, 2, 3, 4]
    # Time 4: request 1, 14 tokens, the first 10 as request 0: only 2 full blocks hit.
    h1, hits = admit(kv, REQ1)
    assert doc(hits) == [0, 1]
    assert doc(h1.ids) == [0, 1, 5, 6]
    # Time 5: request 0 finishes: blocks 2, 3, 4 join the free queue in reverse order.
    kv.free_all(h0)
    assert doc(list(kv._queue)) == [7, 8, 9, 4, 3, 2]
    # Time 6: request 1 finishes.
    kv.free_all(h1)
    assert doc(list(kv._queue)) == [7, 8, 9, 4, 3, 2, 6, 5, 1, 0]
    # Time 7: request 2, 29 tokens, the first 12 as request 0: blocks 0, 1, 2 hit and leave the
    # queue; the new blocks come from its head.
    h2, hits = admit(kv, REQ2)
    assert doc(hits) == [0, 1, 2]
    assert doc(h2.ids) == [0, 1, 2, 7, 8, 9, 4, 3]


def test_only_full_blocks_hit():
    """prefix_caching.md: "We only cache full blocks"."""
    kv = KVCache(20, 4, prefix_caching=True)
    admit(kv, tuple(range(10)))  # 2 full blocks, 2 tokens in the third
    h = Holding()
    hits, _ = kv.lookup(h, (*tuple(range(10)), 50, 51), 1, 12)
    assert len(hits) == 2


def test_the_last_prompt_token_is_always_recomputed():
    """kv_cache_manager.py: ``max_cache_hit_length = request.num_tokens - 1`` ("we must
    recompute the last token to obtain logits"): an 8-token prompt cached whole hits 1 block."""
    kv = KVCache(20, 4, prefix_caching=True)
    admit(kv, tuple(range(8)))
    h = Holding()
    hits, _ = kv.lookup(h, tuple(range(8)), 1, 8)
    assert len(hits) == 1


def test_hits_on_free_blocks_count_against_the_free_queue():
    kv = KVCache(20, 4, prefix_caching=True)
    h, _ = admit(kv, tuple(range(12)))
    kv.free_all(h)
    free = kv.free
    hits, in_queue = kv.lookup(Holding(), (*tuple(range(12)), 99), 1, 13)
    assert len(hits) == in_queue == 3
    h2 = Holding()
    kv.allocate(h2, 13, hits)
    assert kv.free == free - 4  # 3 taken off the queue by the hit, 1 new


def test_mooncake_ids_name_512_token_blocks():
    """A Mooncake hash id names 512 prompt tokens (its trace README); with 16-token KV blocks
    two prompts that share their first id share exactly 32 blocks."""
    a = list(chain_keys((7, 8), 512, 16))
    b = list(chain_keys((7, 9), 512, 16))
    assert len(a) == len(b) == 64
    same = sum(1 for x, y in zip(a, b, strict=True) if x == y)
    assert same == 32 and a[:32] == b[:32]


def test_counts_only_without_prefix_caching():
    kv = KVCache(10, 16)
    h = Holding()
    kv.allocate(h, 33)
    assert (h.n, kv.free, kv.used) == (3, 6, 3)
    kv.free_all(h)
    assert kv.free == 9
    with pytest.raises(ConfigError, match="beyond the free blocks"):
        kv.allocate(Holding(), 16 * 10)


def test_a_cache_with_no_room_is_refused():
    with pytest.raises(ConfigError, match="no room"):
        KVCache(1, 16)
