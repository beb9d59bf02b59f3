"""Sweeps and kernel autotuning, on one process, a local pool or Ray (``trnsim sweep``,
``trnsim tune``).

The top layer, beside ``trnsim.cli``: a sweep runs other verbs' own code at many points. Its
public face:

- ``spec.load(path)`` / ``spec.parse(data)``: a checked ``Spec`` and its points;
- ``engine.run_spec(spec, table, backend, bar)``: run the pending points into a
  ``table.Table`` (CSV, JSONL or Parquet; resumable, valid after Ctrl-C);
- ``backends.Serial()``, ``backends.Pool(workers)``, ``backends.RayBackend(address)``: where
  points run, with the same rows whatever the backend;
- ``tune``: candidates of a kernel file's parameters, checked and timed;
- ``pareto.front(...)`` and ``pareto.chart(...)``: the Pareto front of two metrics.

Ray, pyarrow and PyYAML are optional (the ``ray`` extra), imported only through
``trnsim.extras`` when a sweep asks for them.
"""

from trnsim.sweep.backends import Pool, RayBackend, Serial
from trnsim.sweep.spec import Spec, SpecError, load, parse

__all__ = ["Pool", "RayBackend", "Serial", "Spec", "SpecError", "load", "parse"]
