"""Opt-in accelerators of the plain interpreter (``trnsim.core.machine``), switched by
``trnsim.core.options.CoreOptions``; each gives the plain path's bits, record and errors.

- ``decode``: decoded-tile cache (``nc_matmul`` operands) and the PSUM open-accumulation memo
  (``fast_paths``);
- ``deferred``: the data work on other threads (``deferred``).
"""
