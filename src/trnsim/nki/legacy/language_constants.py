"""``neuronxcc.nki.language.constants``: the sizes legacy kernels read by name (compiler-emitted
kernels import ``sizeinbytes``; the 2.26 direct-allocation docstrings name
``nki.language.constants.sbuf_min_align``). Values from trnsim's formats and ``nl.tile_size``."""

from __future__ import annotations

from typing import Any

from trnsim.numerics import get_format

sbuf_min_align = 4
"""Bytes: the minimum byte alignment of an SBUF free-dimension address (and of PSUM, below);
also ``nl.tile_size.sbuf_min_align`` / ``psum_min_align`` in the legacy front end."""
psum_min_align = 4


def sizeinbytes(dtype: Any) -> int:
    """Bytes per element of ``dtype`` (a packed x4 type counts its 4-byte word)."""
    return int(get_format(dtype).dtype.itemsize)


__all__ = ["psum_min_align", "sbuf_min_align", "sizeinbytes"]
