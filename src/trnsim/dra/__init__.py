"""trnsim.dra: Kubernetes Dynamic Resource Allocation of Trainium devices and UltraServers.

A fleet (:mod:`~trnsim.dra.fleet`) becomes the ResourceSlices the Neuron DRA driver publishes
(:mod:`~trnsim.dra.driver`); ResourceClaims and templates (:mod:`~trnsim.dra.k8s`,
:mod:`~trnsim.dra.manifests`) are allocated as Kubernetes' structured allocator does
(:mod:`~trnsim.dra.allocator`, :mod:`~trnsim.dra.schedule`) with CEL selectors
(:mod:`~trnsim.dra.cel`); a job trace runs on the fleet over time under a placement policy
(:mod:`~trnsim.dra.policies`, :mod:`~trnsim.dra.sim`).

CEL and YAML come from the ``dra`` extra (cel-python, PyYAML), imported lazily in one place
(:mod:`~trnsim.dra._optional`): importing this package needs neither.
"""

from trnsim.dra._optional import MissingExtraError
from trnsim.dra.fleet import Fleet, FleetError

__all__ = ["Fleet", "FleetError", "MissingExtraError"]
