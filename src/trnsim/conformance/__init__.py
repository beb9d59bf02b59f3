"""Conformance: public NKI kernels (AWS's nki-library, nki-samples, the SDK docs) run unmodified
from a local checkout and compared with NumPy references written here.

No public kernel code lives in this package: a ``Case`` names a file inside a checkout, the
kernel's name in it, call shapes and a reference, all written here.
"""

from trnsim.conformance.case import Call, Case

__all__ = ["Call", "Case"]
