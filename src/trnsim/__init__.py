"""trnsim: a software Trainium3.

Layers, each importing only from the ones below it::

    cli / report -> perf -> workloads -> fabric -> nki -> core -> numerics -> hw

``trnsim.errors`` is a leaf module every layer may import.
"""

__version__ = "0.1.0"
