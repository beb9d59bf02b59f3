"""trnsim: a software Trainium3.

Layers, each importing only from the ones below it (``tests/test_layers.py`` checks every
import, lazy ones included)::

    cli, sweep                 the verbs; sweeps run the verbs' own code at many points
    serve | torch | dra        serving under load (above perf); PyTorch (above nki and perf);
                               Kubernetes DRA (above fabric and perf)
    perf -> workloads -> fabric
    conformance                public kernel suites run unmodified (above nki)
    nki -> report -> core -> numerics -> hw

``trnsim.report`` (tables, plots, traces, progress, files written whole) sits just above
``core``: the kernel interface writes its profiles and the fabric's flow simulation shows
progress through it. ``trnsim.errors`` is a leaf every layer may import; ``trnsim.extras`` is
the one door to the optional dependencies (ray, pyarrow, yaml, cel): ``import trnsim`` needs
none of them.
"""

__version__ = "0.1.0"
