"""MWEM's argument checks that other front-ends share: an option among choices, a workload on the data's domain.

The workload is what MWEM selects from (Hardt, Ligett & McSherry, "A Simple and Practical Algorithm
for Differentially Private Data Release", NeurIPS 2012, Algorithm 1: the query class ``Q``);
HDMM's front-end takes its workload the same way. Everything is checked before any private value is
read.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...data.domain import Domain
from ...privacy import check_real as _real
from ...queries.workload import Workload


def check_choice(value, name: str, options: tuple, where: str) -> str:
    """``value`` if it is one of ``options``, else a ValueError naming ``where`` and ``name``.

    Example:
        >>> check_choice("gaussian", "noise", ("laplace", "gaussian"), "mwem")
        'gaussian'
    """
    if value not in options:
        raise ValueError(f"{where}: unknown {name} {value!r}; expected one of {options}")
    return value


def _alpha(alpha, where: str) -> float:
    a = _real(alpha, "alpha", where)
    if not 0 < a < 1:
        raise ValueError(f"{where}: alpha (the measurement's share of each round) must be in (0, 1), got {alpha!r}")
    return a


def check_workload(workload, domain: Domain, where: str) -> Workload:
    """The workload a front-end works on, checked against the data's domain before anything is computed.

    Args:
        workload: None (all 2-way marginals, needs two attributes), a :class:`~pgmjax.Workload` whose
            attributes the domain has with the same sizes, or a list of cliques (their marginals).
        domain: the data's domain.
        where: the front-end's name, for the messages.

    Returns:
        A :class:`~pgmjax.Workload`.

    Example:
        >>> dom = Domain({"a": 2, "b": 3, "c": 2})
        >>> check_workload(None, dom, "mwem").cliques, check_workload([("a", "c")], dom, "mwem").cliques
        ((('a', 'b'), ('a', 'c'), ('b', 'c')), (('a', 'c'),))
    """
    if workload is None:
        if len(domain) < 2:
            raise ValueError(f"{where}: the default workload (all 2-way marginals) needs at least 2 attributes")
        return Workload.all_kway(domain, 2)
    if isinstance(workload, Workload):
        if workload.domain != domain:
            for c in set(workload.cliques):
                for a in c:
                    if a not in domain or domain[a] != workload.domain[a]:
                        raise ValueError(f"{where}: workload attribute {a!r} is missing from, or sized differently in, the data's domain")
        return workload
    if isinstance(workload, (str, bytes)) or not isinstance(workload, Sequence):
        raise TypeError(f"{where}: workload must be a pgmjax.Workload or a list of cliques, got {type(workload).__name__}")
    return Workload.marginals(domain, workload)
