"""MWEM and MWEM+PGM: the multiplicative-weights exponential mechanism, with and without the engine.

Hardt, Ligett & McSherry, "A simple and practical algorithm for differentially private data release",
NeurIPS 2012 (arXiv 1012.4763), Algorithm 1; the "+PGM" arm replaces the multiplicative-weights (MW)
update by graphical-model estimation (McKenna, Sheldon & Miklau, ICML 2019, arXiv 1901.09136,
Section 6).

Each round selects something badly answered by the current estimate with the exponential mechanism
(EM), measures it with Laplace or Gaussian noise and re-estimates. Two selection modes:

* ``selection="marginal"`` (recommended; private-pgm ``mechanisms/mwem+pgm.py``): the
  candidates are the workload's cliques whose addition keeps the model under a size cap that grows
  linearly over the rounds, the quality is ``||mu_C(D) - mu_hat_C||_1 - n_C`` and the whole marginal
  is measured (its cells are disjoint, so one noise scale covers them all).
* ``selection="query"`` (the ICML 2019 experiment; private-pgm ``examples/mwem.py``): the
  candidates are every row of every workload query (every cell for plain marginals, every prefix
  range for the benchmark workload), the quality is ``|w^T mu_C(D) - w^T mu_hat_C|`` and one row is
  measured per round.

Two arms on the same noisy measurements:

* **+PGM** (``result.model``): after every round :func:`pgmjax.estimate` refits the graphical model
  to all measurements so far, warm-started from the previous round's model; ``total = N`` when
  ``bounded`` (``N`` public), else estimated from the measurements.
* **original** (``result.original``): the MW update on a factored full table (one table per connected
  component of the measured cliques' co-occurrence graph, private-pgm's ``_cluster``), held by a
  :class:`~pgmjax.mechanisms.original_estimates.FactoredTable`. After round ``t``'s measurement it runs
  ``mw_iters`` passes over measurements ``1..t``; a pass accumulates ``sum_i Q_i^T (y_i - Q_i A)``
  and multiplies the table by ``exp(update / (2 N))`` once (the paper's update, batched as in the
  reference code), warm-started from round ``t - 1``'s table.

Which arm drives the selection: MWEM is adaptive (round ``t``'s EM scores candidates against the
current estimate), so only one estimator can be in the loop if both arms are to share every
measurement. Here the **+PGM arm drives the selection**, as in the ICML 2019 comparison of
estimators on one measurement transcript; the MW arm then replays that transcript (same selections,
same noisy answers). The MW arm is therefore "MW estimation on MWEM+PGM's measurements", not a
separate MWEM run whose own estimate chooses the queries. Before allocating anything the MW arm
computes the size of its tables; above ``max_table_cells`` (default 2^28 cells, 2 GiB of float64) it
does not run: ``result.original`` is None and ``result.original_error`` names the component, its
cells and memory. On Adult-sized data with many measured cliques this is the expected outcome: MWEM
is infeasible without the engine.

Budget (Hardt, Ligett & McSherry 2012; McKenna et al., ICML 2019), ``T`` rounds, measurement share ``alpha``:

* Laplace (pure ``eps``-DP): ``eps_r = eps / T``; measurement scale ``b = Delta1 / (alpha eps_r)``;
  EM ``eps_EM = (1 - alpha) eps_r``.
* Gaussian (``rho = cdp_rho(eps, delta)`` zCDP): ``rho_r = rho / T``;
  ``sigma = Delta2 sqrt(1 / (2 alpha rho_r))``; EM ``eps_EM = sqrt(8 (1 - alpha) rho_r)``.

The last measurement spends exactly what is left, so the ledger sums to the budget.

Modules, one idea each; each imports only those above it:

* ``original_arm``: multiplicative weights on a factored table (:func:`mw_update`), its memory
  guard and the replay of the transcript.
* ``arguments``: MWEM's own options (:class:`MWEMOptions`, checked where made), what its run reports
  (:class:`MWEMInfo`) and checks (:func:`check_alpha`);
  those other front-ends share too (:func:`check_choice`, :func:`check_workload`) live in
  :mod:`pgmjax.mechanisms.options`, re-exported here.
* ``budget``: the per-round budget (:func:`mwem_budget`); the model size before a fit
  (:func:`hypothetical_model_size`) lives in :mod:`pgmjax.mechanisms.steps`, re-exported here.
* ``query_rows``: one row of a Kronecker workload query and its sensitivity (``selection="query"``).
* ``rounds``: the +PGM arm's rounds: select, measure, refit.
* ``front_end``: :func:`mwem`, both arms on the same measurements.

The package is named for what it does; the front-end keeps the mechanism's name
(``pgmjax.mechanisms.mwem`` is the function).
"""

from ..options import check_choice, check_workload
from ..steps import hypothetical_model_size, model_mb
from .arguments import MWEMInfo, MWEMOptions, check_alpha
from .budget import mwem_budget
from .front_end import mwem
from .original_arm import DEFAULT_MAX_TABLE_CELLS, mw_update

__all__ = [
    "DEFAULT_MAX_TABLE_CELLS",
    "MWEMInfo",
    "MWEMOptions",
    "check_alpha",
    "check_choice",
    "check_workload",
    "hypothetical_model_size",
    "model_mb",
    "mw_update",
    "mwem",
    "mwem_budget",
]
