"""One conformance case: a public kernel, called unmodified, against a reference written here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Inputs = Callable[[np.random.Generator], Any]


@dataclass(frozen=True)
class Call:
    """What ``Case.inputs`` may return instead of a tuple: positional and keyword arguments
    (for kernels whose tensors come after keyword-only or defaulted parameters)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    """A public kernel and how trnsim checks it.

    name: unique id, e.g. ``"library/rmsnorm"``.
    repo: which checkout the file lives in: ``"nki-library"``, ``"nki-samples"`` or ``"sdk226"``
        (aws-neuron-sdk at v2.26.0) or ``"sdk"`` (aws-neuron-sdk HEAD).
    path: the file's path inside that checkout.
    kernel: the kernel function's name in that file.
    api: ``"nki"`` (NKI 0.6, ``import nki``) or ``"legacy"`` (``import neuronxcc.nki``).
    inputs: ``inputs(rng)`` returns the positional arguments (NumPy arrays and scalars), or a
        ``Call`` with keyword arguments too (merged over ``kwargs``). It runs with the
        checkout importable, so it may build the library's own config objects.
    reference: ``reference(*inputs, **kwargs)`` returns the expected output(s), in NumPy,
        written here from what the documentation specifies.
    kwargs: keyword arguments passed to both the kernel and the reference.
    grid: SPMD launch grid (``kernel[grid](...)``), or None.
    rtol, atol: the tolerance, chosen from the dtypes involved (say why in ``notes``).
    target: NeuronCore generation (``"gen2"``, ``"gen3"``, ``"gen4"``).
    decode: optional ``decode(outputs)``: the kernel's outputs in the form the reference
        returns (e.g. an fp8 tensor whose last 4 bytes of a row are an fp32 scale, split in two).
    out_args: the positions of arguments the kernel writes as its outputs (an output buffer
        passed in, nki-library's ``output.must_alias_input``): the outputs compared are those
        arguments after the run (one array, or a tuple), not the kernel's return value.
    ranks: run the kernel as this many ranks (``trnsim.nki.simulate.run_ranks``: each rank a
        launch of its own, ``nki.collectives`` exchanging between them). Then ``inputs(rng)``
        returns one argument tuple (or ``Call``) per rank, ``reference(per_rank)`` takes that
        list and returns each rank's expected outputs (a list), and the profile is the
        slowest rank's time.
    notes: why these shapes, tolerance, anything unusual.
    driver: ``driver(fn)`` returns a kernel written here that calls ``fn``, the library's
        (unmodified) function imported from the checkout, the way the library's own tests do;
        that kernel is launched instead of ``fn``. For subkernels that take SBUF tensors (it
        loads HBM inputs to SBUF and stores the SBUF outputs) or whose contract needs state
        made inside the launch (an SBUF manager of the program's own). Each LNC program runs
        it afresh, so nothing mutable is shared between programs.
    unwritten: why the kernel leaves elements of its returned outputs unwritten, when it does so
        on purpose (``allow_unwritten`` of ``trnsim.nki.run``); None: every element must be
        written (an element never written is a ``kernel-error``, ``output-unwritten``).
    """

    name: str
    repo: str
    path: str
    kernel: str
    inputs: Inputs
    reference: Callable[..., Any]
    api: str = "nki"
    kwargs: dict[str, Any] = field(default_factory=dict)
    grid: tuple[int, ...] | None = None
    rtol: float = 1e-5
    atol: float = 1e-5
    target: str = "gen4"
    decode: Callable[[Any], Any] | None = None
    out_args: tuple[int, ...] = ()
    ranks: int | None = None
    notes: str = ""
    driver: Callable[[Any], Any] | None = None
    unwritten: str | None = None
