"""The matmul kernel behind trnsim's compute tables, as an example kernel file.

The kernel ships inside the package (``src/trnsim/perf/kernels/matmul_table.py``, so that
``python -m trnsim.perf.tables build`` works from an installed trnsim); this file loads it, so
``trnsim profile examples/kernels/timing/matmul_table.py`` times its default inputs and
``trnsim run`` checks it against its golden.
"""

from trnsim.perf.tables import kernel_module

_kernel_file = kernel_module()
blocked_matmul = _kernel_file.blocked_matmul
make_inputs = _kernel_file.make_inputs
golden = _kernel_file.golden
KERNEL = _kernel_file.KERNEL
TOLERANCE = _kernel_file.TOLERANCE
