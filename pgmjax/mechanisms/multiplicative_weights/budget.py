"""MWEM's budget per round (measurement noise, exponential-mechanism epsilon) and the model-size cap.

Hardt, Ligett & McSherry, "A Simple and Practical Algorithm for Differentially Private Data Release",
NeurIPS 2012, Algorithm 1 (``eps / T`` per round, split between the exponential mechanism and the
Laplace measurement); the Gaussian/zCDP variant and the model-size cap of MWEM+PGM follow McKenna,
Sheldon & Miklau, "Graphical-model based estimation and inference for differential privacy", ICML
2019, Section 6.
"""

from __future__ import annotations

import math

from ...privacy import cdp_rho
from ...checks import check_bool as _bool
from ...checks import check_count as _int
from ...checks import check_positive as _positive
from ...checks import check_real as _real
from ..options import check_choice
from ..steps import hypothetical_model_size, model_mb  # noqa: F401  (re-exported: the package's names)
from .arguments import NOISES, check_alpha


def mwem_budget(
    epsilon: float,
    rounds: int,
    *,
    delta: float | None = None,
    noise: str = "laplace",
    bounded: bool = False,
    alpha: float = 0.9,
    sensitivity: float | None = None,
) -> dict:
    """Per-round budget of MWEM (Hardt, Ligett & McSherry 2012; McKenna et al., ICML 2019): measurement noise and EM epsilon.

    Laplace: ``eps_r = eps/T``, ``b = Delta1 / (alpha eps_r)``, ``eps_EM = (1 - alpha) eps_r``.
    Gaussian: ``rho_r = cdp_rho(eps, delta) / T``, ``sigma = Delta2 sqrt(1 / (2 alpha rho_r))``,
    ``eps_EM = sqrt(8 (1 - alpha) rho_r)``, so a round costs ``alpha rho_r + (1 - alpha) rho_r = rho_r``.

    Args:
        epsilon: the whole run's epsilon.
        rounds: ``T``.
        delta: needed for Gaussian noise.
        noise: ``"laplace"`` or ``"gaussian"``.
        bounded: replace-one neighbours (sensitivities doubled / times sqrt 2) instead of add/remove.
        alpha: the share of each round's budget spent on the measurement.
        sensitivity: the measurement's sensitivity (L1 for Laplace, L2 for Gaussian); default that of
            one marginal under the convention (1 or 2, resp. 1 or sqrt 2).

    Returns:
        A dict: ``noise``, ``rounds``, ``scale`` (``b`` or ``sigma``), ``stddev`` (of one noisy value),
        ``em_epsilon``, and the per-round budgets (``round_epsilon``, ``measure_epsilon`` for Laplace;
        ``rho``, ``round_rho``, ``measure_rho``, ``em_rho`` for Gaussian).

    Example:
        >>> b = mwem_budget(1.0, 14, noise="gaussian", delta=1e-9)      # Adult, T = d = 14
        >>> round(b["scale"], 2), round(b["em_epsilon"], 5)
        (22.79, 0.02925)
    """
    where = "mwem_budget"
    epsilon = _positive(epsilon, "epsilon", where)
    rounds = _int(rounds, "rounds", where, 1)
    noise = check_choice(noise, "noise", NOISES, where)
    alpha = check_alpha(alpha, where)
    bounded = _bool(bounded, "bounded", where)
    if noise == "laplace":
        d1 = (2.0 if bounded else 1.0) if sensitivity is None else _positive(sensitivity, "sensitivity", where)
        eps_r = epsilon / rounds
        b = d1 / (alpha * eps_r)
        return {
            "noise": noise,
            "rounds": rounds,
            "round_epsilon": eps_r,
            "measure_epsilon": alpha * eps_r,
            "em_epsilon": (1.0 - alpha) * eps_r,
            "scale": b,
            "stddev": math.sqrt(2.0) * b,
        }
    if delta is None:
        raise ValueError(f"{where}: Gaussian noise gives (epsilon, delta)-DP; pass delta= (e.g. 1e-9)")
    delta = _real(delta, "delta", where)
    if not 0 < delta < 1:
        raise ValueError(f"{where}: delta must be in (0, 1), got {delta!r}")
    d2 = (math.sqrt(2.0) if bounded else 1.0) if sensitivity is None else _positive(sensitivity, "sensitivity", where)
    rho = cdp_rho(epsilon, delta)
    rho_r = rho / rounds
    sigma = d2 * math.sqrt(1.0 / (2.0 * alpha * rho_r))
    return {
        "noise": noise,
        "rounds": rounds,
        "rho": rho,
        "round_rho": rho_r,
        "measure_rho": alpha * rho_r,
        "em_rho": (1.0 - alpha) * rho_r,
        "em_epsilon": math.sqrt(8.0 * (1.0 - alpha) * rho_r),
        "scale": sigma,
        "stddev": sigma,
    }
