"""trnsim.nki: an NKI-compatible kernel interface (the public ``nki`` API, NKI 0.3 - 0.6).

``trnsim.nki.install()`` makes ``import nki`` / ``nki.language`` / ``nki.isa`` resolve here.
``jit``, ``simulate`` and ``kernel[lnc](...)`` run kernels on emulated NeuronCores;
``run(kernel, *arrays, target=..., record...)`` also returns the instruction record.
"""

from numpy import dtype

from trnsim.nki import isa, language
from trnsim.nki.compat import install, uninstall
from trnsim.nki.simulate import Kernel, RunResult, jit, run, simulate
from trnsim.nki.tensor import NkiTensor

__trnsim__ = True

__all__ = [
    "Kernel",
    "NkiTensor",
    "RunResult",
    "dtype",
    "install",
    "isa",
    "jit",
    "language",
    "run",
    "simulate",
    "uninstall",
]
