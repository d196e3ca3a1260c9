"""Log-space contraction primitives used by the pgmjax marginal oracle.

Every primitive here has a plain reference version in
:mod:`pgmjax.kernels.reference` (NumPy, float64, no tricks) that the tests
compare against; an accelerator-specific kernel (Pallas, Triton)
can replace an entry here as long as it matches its reference.

Primitives:
    logsumexp(x, axis): log(sum(exp(x))) that is exact for -inf entries and
        has a NaN-free gradient even when a whole slice is -inf.
    log_einsum(subscripts, *log_factors): the log of an einsum of the
        exponentiated factors (variable elimination in log space).
    sum_axes(x, axes): a sum over many axes (a marginal of a large table) in
        two stages, so its float32 error grows with sqrt(cells), not cells.
    max_axes(x, axes): a maximum over several trailing axes, the last one first
        (XLA:CPU's one windowed reduction over a whole table is several times slower).
    marginalize(x, attrs, keep): a labelled table summed down to the labels keep,
        in keep's order (with sum_axes).
    segment_logsumexp(values, ids, n): log(sum(exp(values))) per segment, -inf (no NaN) for an empty
        or all -inf segment.
"""

from .logspace import log_einsum, logsumexp, segment_logsumexp
from .reductions import marginalize, max_axes, sum_axes

__all__ = ["logsumexp", "log_einsum", "marginalize", "max_axes", "segment_logsumexp", "sum_axes"]
