"""The KV cache of one replica: paged blocks, reference counts, prefix hashing, LRU eviction.

It mirrors vLLM V1's block pool and KV cache manager (vllm-project/vllm
``vllm/v1/core/block_pool.py`` @ 002f3491, ``vllm/v1/core/kv_cache_manager.py`` @ 003df296,
``docs/design/prefix_caching.md`` @ 01ff8bff), written here from what they specify:

- The pool holds ``num_blocks`` blocks of ``block_size`` tokens; one is the null block (a
  placeholder that is never allocated), so ``num_blocks - 1`` are usable.
- A request holds ``ceil(tokens / block_size)`` blocks for the tokens whose KV it has computed
  (or is computing this step).
- **Prefix caching** (hash-based): a *full* block is identified by the hash of its tokens and
  of every token before it; only full blocks are cached and only full blocks hit ("We only
  cache full blocks"). A new request's hit is its longest run of leading cached blocks, capped
  so the last prompt token is always recomputed (``max_cache_hit_length = num_tokens - 1``).
  A hit block's reference count goes up; a block with no reference sits in the free queue,
  still cached, until it is allocated again (evicted).
- **Free queue** (LRU): blocks are allocated from the head; a finished request's blocks go to
  the tail in reverse order (its last block, which hashes the most tokens and is the least
  likely to be shared, is evicted first); a hit on a free block takes it out of the queue.

Token identity: requests carry ``hash_ids`` (one per ``hash_block`` prompt tokens; see
``trnsim.serve.workload``). KV block ``i`` covers tokens ``[i b, (i + 1) b)``; it is shareable
when its last token lies inside the prompt blocks the ids cover, and its hash is the chain of
ids up to that block plus its offset in it. Other blocks (a prompt's tail, generated tokens)
are the request's own and never hit.

Without prefix caching only the counts matter, and the manager keeps counts only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from trnsim.errors import ConfigError


def chain_keys(hash_ids: tuple[int, ...], hash_block: int, block_size: int) -> Iterator[int]:
    """Hash keys of a prompt's shareable KV blocks, in order (see module docstring)."""
    chain = 0
    done = -1
    i = 0
    while True:
        last = (i + 1) * block_size - 1
        j = last // hash_block
        if j >= len(hash_ids):
            return
        while done < j:
            done += 1
            chain = hash((chain, hash_ids[done]))
        yield hash((chain, last % hash_block))
        i += 1


class Holding:
    """The blocks one request holds: a count, and (with prefix caching) their ids."""

    __slots__ = ("ids", "keyed", "keys", "n")

    def __init__(self) -> None:
        self.n = 0
        self.ids: list[int] = []
        self.keyed = 0  # leading blocks whose hash is registered (or known not shareable)
        self.keys: list[int] | None = None


class KVCache:
    """Blocks of one replica (module docstring)."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = False) -> None:
        if block_size < 1:
            raise ConfigError(f"kv cache: block_size must be >= 1, got {block_size}")
        if num_blocks < 2:
            raise ConfigError(
                f"kv cache: {num_blocks} blocks of {block_size} tokens leave no room for the "
                "KV cache (at least 2 needed, one is vLLM's null block)"
            )
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.usable = num_blocks - 1
        self.prefix_caching = prefix_caching
        self._free = self.usable
        if prefix_caching:
            # block 0 is the null block; 1..usable start free, in order
            self._queue: OrderedDict[int, None] = OrderedDict(
                (b, None) for b in range(1, num_blocks)
            )
            self._ref = [0] * num_blocks
            self._key_of: dict[int, int] = {}
            self._cached: dict[int, int] = {}
        self.hits = 0
        self.queries = 0

    # --- state ------------------------------------------------------------------------------

    @property
    def free(self) -> int:
        """Blocks that can be allocated (free, including cached blocks nobody references)."""
        return len(self._queue) if self.prefix_caching else self._free

    @property
    def used(self) -> int:
        return self.usable - self.free

    def blocks_for(self, tokens: float) -> int:
        """Blocks holding ``tokens`` tokens."""
        return -(-int(tokens) // self.block_size) if tokens > 0 else 0

    # --- prefix lookups ---------------------------------------------------------------------

    def lookup(
        self, h: Holding, hash_ids: tuple[int, ...], hash_block: int, tokens: int
    ) -> tuple[list[int], int]:
        """(cached block ids, how many of them are in the free queue) of the longest cached
        prefix of a new request of ``tokens`` prompt tokens (at most ``tokens - 1`` tokens
        hit). Pure: nothing changes until ``allocate``."""
        if not self.prefix_caching or not hash_ids:
            return [], 0
        if h.keys is None:
            h.keys = list(chain_keys(hash_ids, hash_block, self.block_size))
        limit = (tokens - 1) // self.block_size
        out: list[int] = []
        in_queue = 0
        for key in h.keys[:limit]:
            b = self._cached.get(key)
            if b is None:
                break
            out.append(b)
            if self._ref[b] == 0:
                in_queue += 1
        return out, in_queue

    # --- allocation -------------------------------------------------------------------------

    def allocate(self, h: Holding, tokens: float, hits: list[int] | None = None) -> None:
        """Give ``h`` the blocks for ``tokens`` tokens: the hit blocks first (a new request),
        then new blocks from the head of the free queue. The caller checked the room."""
        need = max(0, self.blocks_for(tokens) - h.n - (len(hits) if hits else 0))
        if not self.prefix_caching:
            if need > self._free:
                raise ConfigError("kv cache: allocation beyond the free blocks (a policy bug)")
            self._free -= need
            h.n += need
            return
        ref, queue = self._ref, self._queue
        if hits:
            for b in hits:
                if ref[b] == 0:
                    del queue[b]
                ref[b] += 1
                h.ids.append(b)
            h.n += len(hits)
            h.keyed = len(hits)
        if need > len(queue):
            raise ConfigError("kv cache: allocation beyond the free blocks (a policy bug)")
        for _ in range(need):
            b, _none = queue.popitem(last=False)
            key = self._key_of.pop(b, None)
            if key is not None and self._cached.get(key) == b:
                del self._cached[key]
            ref[b] = 1
            h.ids.append(b)
        h.n += need

    def register(self, h: Holding, computed_tokens: float) -> None:
        """Cache the newly full shareable blocks of ``h`` (its KV now covers
        ``computed_tokens`` tokens)."""
        if not self.prefix_caching or h.keys is None:
            return
        full = min(int(computed_tokens) // self.block_size, len(h.keys), h.n)
        for i in range(h.keyed, full):
            key = h.keys[i]
            b = h.ids[i]
            if key not in self._cached:  # an identical block already cached keeps its place
                self._cached[key] = b
                self._key_of[b] = key
        h.keyed = max(h.keyed, full)

    def free_all(self, h: Holding) -> None:
        """Release every block of ``h`` (a finished or preempted request)."""
        if not self.prefix_caching:
            self._free += h.n
        else:
            ref, queue = self._ref, self._queue
            for b in reversed(h.ids):
                ref[b] -= 1
                if ref[b] == 0:
                    queue[b] = None
            h.ids = []
            h.keyed = 0
        h.n = 0
