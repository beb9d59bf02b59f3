"""Demo section: Kubernetes DRA on a Trainium fleet, computed live (needs no extra: the fleet
shorthand, the driver's attributes and the simulator use neither CEL nor YAML)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trnsim.dra import driver, sim
from trnsim.dra import fleet as fleet_mod
from trnsim.dra.trace import synthetic


def section(console: Console) -> None:
    fl = fleet_mod.load("trn2.48xlarge=8,trn2-ultraserver=16")
    attrs = dict(driver.device_attributes(fl, fl.nodes[0], 5))
    shown = ("deviceId", "topology_x", "topology_y", "resource.aws.com/devicegroup4_id")
    console.print(
        "neurondevice5 of a trn2.48xlarge, as the Neuron DRA driver publishes it: "
        + ", ".join(f"{k}={attrs[k].value}" for k in shown),
        highlight=False,
    )
    tr = synthetic(300, fl.devices, 16, seed=1)
    t = Table(title=f"300 jobs on {fl.summary()}")
    for col in ("policy", "utilisation", "mean queue", "jobs across US", "frag. US"):
        t.add_column(col, justify="right")
    for name in ("dra", "count", "best-fit"):
        s = sim.simulate(tr, fl, name).summary()
        t.add_row(
            name,
            f"{s['utilisation']:.1%}",
            f"{s['queue_delay_s']['mean'] / 60:.1f} min",
            str(s["jobs_across_ultraservers"]),
            f"{s['fragmentation']['ultraserver']:.1%}",
        )
    console.print(t)
