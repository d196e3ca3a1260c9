"""A product prior from noisy one-way marginals.

Chen, Zhou & Bhowmick, "Integrating Historical Noisy Answers for Improving Data Utility under Differential
Privacy" (EDBT 2012), section 4.3 and footnote 3: the prior ``p0(t) = prod_a p0_a(t_a)`` of both estimators is
learnt from all one-way marginals released with a little budget (the paper: epsilon = 0.02); negative noisy
counts are clipped, floored and normalised. Measuring the marginals costs budget (release them with
:meth:`pgmjax.Accountant.measure_many`); building the prior from the released answers is free.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..data.domain import Domain
from ..queries.measurement import Measurement, validate_measurements
from .rows import uniform_prior


def prior_from_marginals(domain: Domain, measurements: Sequence[Measurement], floor: float = 0.5) -> dict[str, np.ndarray]:
    """Product prior from noisy one-way marginals (clip at ``floor``, normalise; [CZB] footnote 3).

    Several measurements of one attribute are combined by inverse-variance weighting (per cell). Attributes
    that are not measured keep a uniform factor. The floor keeps every cell visible to the prior-weighted
    inner product and to the maximum-entropy model (a zero in ``p0`` is a structural zero).

    Args:
        domain: the :class:`~pgmjax.Domain`.
        measurements: identity measurements of single attributes (``Measurement((a,), y, stddev)``).
        floor: the smallest count a cell keeps before normalising (positive).

    Returns:
        ``{attribute: probabilities}`` for every attribute of the domain.

    Raises:
        ValueError: a measurement that is not a one-way marginal, or a non-positive floor.

    Example:
        >>> dom = pj.Domain({"a": 3, "b": 2})
        >>> prior_from_marginals(dom, [pj.Measurement(("a",), [6.0, -2.0, 3.5], stddev=1.0)])["a"]
        array([0.6 , 0.05, 0.35])
    """
    where = "prior_from_marginals"
    if not isinstance(domain, Domain):
        raise TypeError(f"{where}: domain must be a pgmjax.Domain, got {type(domain).__name__}")
    if not (isinstance(floor, (int, float)) and floor > 0 and np.isfinite(floor)):
        raise ValueError(f"{where}: floor must be positive and finite, got {floor!r}")
    num: dict[str, np.ndarray] = {}
    den: dict[str, np.ndarray] = {}
    measurements = list(measurements)
    validate_measurements(domain, measurements, where)
    for i, m in enumerate(measurements):
        if len(m.clique) != 1 or m.kind != "identity":
            raise ValueError(f"{where}: measurement {i} on {m.clique} ({m.kind}) is not a one-way marginal")
        a = m.clique[0]
        w = 1.0 / m.row_stddev() ** 2
        num[a] = num.get(a, 0.0) + w * m.y
        den[a] = den.get(a, 0.0) + w
    prior = uniform_prior(domain)
    for a in num:
        counts = np.maximum(num[a] / den[a], float(floor))
        prior[a] = counts / counts.sum()
    return prior
