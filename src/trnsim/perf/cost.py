"""Money and energy: prices per chip-hour and power inputs, with documented, cited defaults.

Prices are not hardware figures, so they live here (not in ``trnsim.hw``) as *inputs*: every
estimate echoes the price it used, and ``CostInputs(prices={...})`` or ``--price`` overrides
them. Power comes from ``ChipSpec.tdp_w`` in ``trnsim.hw``; a chip without a published TDP
gets no energy figure unless the user gives one (``power_w``).

Default prices (USD per chip-hour) and where they come from:

- ``trn2``: 0.50. Seed 003: "Trainium2 long-term contracts reportedly brought effective pricing
  to approximately $0.50/hour per chip".
- ``trn3``: 0.97 = 0.50 x (2.517 / 1.299), the FP8 peak ratio of Trn3 to Trn2. Seed 003:
  "Trainium3 pricing with capacity commitments is expected to be in a similar range
  per-TFLOPS" (the same seed's "roughly 2x better price-performance" contradicts it; the
  per-TFLOPS reading is taken).
- ``b300`` (GB300 NVL72): 2.80 per GPU = the Trn3 Gen2 UltraServer's hourly cost per FP8
  PFLOP/s divided by 0.7. Seed 003: "Per SemiAnalysis analysis, the Trainium3 UltraServer
  delivers around 30% better TCO per marketed FP8 PFLOPS compared to the GB300 NVL72".
- ``tpu-v7``: 2.60 = the same price per FP8 PFLOP/s as the GB300 figure (ASSUMED: no price in
  the seeds).
- ``trn1``: 1.34 = 21.50 / 16, the AWS on-demand price of a trn1.32xlarge (us-east-1, AWS EC2
  pricing page) over its 16 chips.
- ``trainium4``: 0.97 (ASSUMED equal to Trn3: a projected part with no price).
- ``h100-sxm``, ``h200``, ``b200``: 2.00, 2.50, 2.60 (ASSUMED round market figures for
  long-term rental, not from the seeds).

``pue`` (facility power usage effectiveness, default 1.0: chip energy only) and
``power_fraction`` (average power as a fraction of TDP, default 1.0: TDP as an upper bound) are
inputs too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trnsim import inputs
from trnsim.errors import ConfigError
from trnsim.hw import ChipSpec
from trnsim.hw.table import Table

DEFAULT_PRICES: dict[str, float] = {
    "trn1": 1.34,
    "trn2": 0.50,
    "trn3": 0.97,
    "trainium4": 0.97,
    "h100-sxm": 2.00,
    "h200": 2.50,
    "b200": 2.60,
    "b300": 2.80,
    "tpu-v7": 2.60,
}
PRICE_SOURCES: dict[str, str] = {
    "trn1": "AWS on-demand trn1.32xlarge $21.50/h / 16 chips",
    "trn2": "seed 003 (~$0.50/h per chip, long-term contracts)",
    "trn3": "seed 003 ('similar range per-TFLOPS' as Trn2): 0.50 x 2.517/1.299",
    "trainium4": "assumed = trn3",
    "h100-sxm": "assumed market rate",
    "h200": "assumed market rate",
    "b200": "assumed market rate",
    "b300": "seed 003 (SemiAnalysis: Trn3 ~30% better TCO per FP8 PFLOPS than GB300 NVL72)",
    "tpu-v7": "assumed: the GB300 price per FP8 PFLOP/s",
}


_DEFAULT_PRICE_TABLE = Table(DEFAULT_PRICES, what="price")
_NO_POWER = Table()
for _price in DEFAULT_PRICES.values():
    inputs.check("price", _price)


@dataclass(frozen=True, slots=True)
class CostInputs:
    """Prices (USD per chip-hour, by chip name) and power inputs. Overrides merge with defaults."""

    prices: Table = field(default_factory=lambda: _DEFAULT_PRICE_TABLE)
    power_w: Table = field(default_factory=lambda: _NO_POWER)
    pue: float = 1.0
    power_fraction: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.prices, dict):
            object.__setattr__(self, "prices", Table({**DEFAULT_PRICES, **self.prices}))
        if isinstance(self.power_w, dict):
            object.__setattr__(self, "power_w", Table(self.power_w))
        if self.prices is not _DEFAULT_PRICE_TABLE:  # the defaults are checked once, below
            for price in self.prices.values():
                inputs.check("price", price)
        for power in self.power_w.values():
            inputs.check("power", power)
        if self.pue < 1.0 or not 0 < self.power_fraction <= 1.5:
            raise ConfigError(
                f"cost: pue must be >= 1 and power_fraction in (0, 1.5], got {self.pue}, "
                f"{self.power_fraction}"
            )

    def price(self, chip: ChipSpec) -> float | None:
        return self.prices.get(chip.name)

    def power(self, chip: ChipSpec) -> float | None:
        if chip.name in self.power_w:
            return self.power_w[chip.name]
        return chip.tdp_w

    def price_source(self, chip: ChipSpec) -> str:
        if chip.name in self.prices and self.prices[chip.name] != DEFAULT_PRICES.get(chip.name):
            return "user input"
        return PRICE_SOURCES.get(chip.name, "none")


@dataclass(frozen=True, slots=True)
class CostEstimate:
    """Money and energy of running ``chips`` chips for ``seconds``."""

    seconds: float
    chips: int
    price_per_chip_hour: float | None
    usd: float | None
    power_w_per_chip: float | None
    energy_j: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {
            "seconds": self.seconds,
            "price_per_chip_hour_usd": self.price_per_chip_hour,
            "cost_usd": self.usd,
            "power_w_per_chip": self.power_w_per_chip,
            "energy_j": self.energy_j,
        }


def run_cost(chip: ChipSpec, chips: int, seconds: float, inputs: CostInputs) -> CostEstimate:
    """Cost = chips x hours x price; energy = chips x power x power_fraction x PUE x seconds."""
    price = inputs.price(chip)
    power = inputs.power(chip)
    usd = chips * seconds / 3600 * price if price is not None else None
    energy = (
        chips * power * inputs.power_fraction * inputs.pue * seconds if power is not None else None
    )
    return CostEstimate(seconds, chips, price, usd, power, energy)


def price_line(inputs: CostInputs, chip: ChipSpec) -> str:
    """The price an estimate used, for people: "price 0.97 USD/chip-h (source)", or that
    there is none (then no cost figure)."""
    price = inputs.price(chip)
    if price is None:
        return f"price: none for {chip.name} (no cost figure; --price sets one)"
    return f"price {price:g} USD/chip-h ({inputs.price_source(chip)})"


def power_line(inputs: CostInputs, chip: ChipSpec) -> str:
    """The power an estimate used: "power 500 W/chip (TDP in trnsim.hw)", or that there is
    none (then no energy figure)."""
    power = inputs.power(chip)
    if power is None:
        return f"power: no TDP for {chip.name} in trnsim.hw (no energy figure)"
    source = "given" if chip.name in inputs.power_w else "TDP in trnsim.hw"
    return f"power {power:g} W/chip ({source})"
