"""How a fit to calibration rows is scored, once for every fabric fitter.

``RowError`` gives a row with ``measured_s`` and ``model_s`` its signed relative error;
``FitError`` gives a fit with ``rows`` its mean absolute percentage error and its largest error.
Both are slot-free mixins for frozen, slotted dataclasses.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class RowError:
    """Mixin: ``error = (model - measured) / measured`` of a row's ``model_s``, ``measured_s``."""

    __slots__ = ()
    measured_s: float
    model_s: float

    @property
    def error(self) -> float:
        """(model - measured) / measured."""
        return (self.model_s - self.measured_s) / self.measured_s


class FitError:
    """Mixin: ``mape`` and ``max_error`` over a fit's ``rows`` (each with ``error``)."""

    __slots__ = ()
    rows: Sequence[RowError]

    @property
    def mape(self) -> float:
        """Mean absolute percentage error over all rows, as a fraction."""
        return float(np.mean([abs(r.error) for r in self.rows]))

    @property
    def max_error(self) -> float:
        """The largest absolute relative error of any row, as a fraction."""
        return float(max(abs(r.error) for r in self.rows))
