"""U4 coverage simulation, CPU variant (slow): Gaussian noise, exact L2 fits, basic bootstrap 90% intervals.

R = 40 outer draws, B = 40 refits each (the outer fits and every chunk of refits are one batched program of the
same size, compiled once): about 15 s of CPU time. The linearised intervals are left to the full variant and to
U3 (tests/uncertainty/test_uncertainty.py): compiling the batched linearisation of this model alone takes another 18 s of
CPU time. The gates are statistical tests at family-wise level 0.001 each, so a calibrated method fails one of
them about once in a few hundred runs:

* the mean coverage over the 25 gated queries: a two-sided t-test of the R per-draw covered fractions
  (independent draws; the queries of one draw are correlated, so the spread is measured, not assumed);
* each gated query: its covered count inside the central Binomial(R, 0.9) range of probability
  1 - 0.001 / 25 (Bonferroni);
* bootstrap standard errors against the sd of the R estimates: ``(R - 1) (sd / se)^2`` inside the central
  chi-square(R - 1) range of the same probability.

The full variant (R = 400, B = 200, three noise/loss configurations) is bench/uncertainty_u4.py.
"""


import jax
import numpy as np
import pytest
from scipy import stats

R, B, LEVEL, ALPHA = 40, 40, 0.9, 1e-3


@pytest.mark.slow
def test_u4_cpu_variant_gaussian_l2():
    from bench import uncertainty_u4 as u4

    cov, kinds = u4.run("gauss-l2", R=R, B=B, key=jax.random.key(0), methods=("bootstrap",), draws_per_call=1)
    assert cov.iterations["converged"] == {"fits": True, "bootstrap": True}
    gated = np.array([k != "low count" for k in kinds])
    n = int(gated.sum())
    count_lo = stats.binom.ppf(ALPHA / n / 2, R, LEVEL)
    count_hi = stats.binom.isf(ALPHA / n / 2, R, LEVEL)
    t_crit = stats.t.isf(ALPHA / 2, R - 1)
    for method in ("bootstrap",):
        covered = np.stack([np.ravel(c) for c, g in zip(cov.covered[method][LEVEL], gated) if g], 1)  # (R, n)
        per_draw = covered.mean(1)
        se_mean = per_draw.std(ddof=1) / np.sqrt(R)
        assert abs(per_draw.mean() - LEVEL) <= t_crit * se_mean, (method, per_draw.mean(), se_mean)
        counts = covered.sum(0)
        assert np.all((counts >= count_lo) & (counts <= count_hi)), (method, counts, count_lo, count_hi)
    # bootstrap standard errors (mean over the draws) against the spread of the R outer estimates
    chi_lo, chi_hi = stats.chi2.ppf(ALPHA / n / 2, R - 1), stats.chi2.isf(ALPHA / n / 2, R - 1)
    for s, e, g in zip(cov.se["bootstrap"], cov.estimates, gated):
        if g:
            stat = (R - 1) * np.var(np.ravel(e), ddof=1) / np.mean(s) ** 2
            assert chi_lo <= stat <= chi_hi, (stat, chi_lo, chi_hi)
