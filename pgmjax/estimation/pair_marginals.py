"""Many one- and two-way marginals of one clique table as a few matrix products.

Split a table's axes into a leading group ``L`` and a trailing group ``R`` and read it as a matrix ``X``
(``|L|`` rows, ``|R|`` columns; a free reshape of the stored table). With ``A_L`` the one-hot design matrix
of ``L`` (a row per cell of ``L``, a column per value of each attribute in ``L``: 1 where the cell holds that
value) and ``A_R`` that of ``R``,

* ``A_L^T X A_R`` holds every two-way marginal of one attribute of ``L`` and one of ``R`` (block ``(a, b)``);
* ``A_L^T diag(X 1) A_L`` holds every two-way marginal within ``L`` (off-diagonal blocks) and every one-way
  marginal of ``L`` (the diagonals of the diagonal blocks); ``A_R^T diag(X^T 1) A_R`` likewise for ``R``.

These are the moment (Gram) matrices of one-hot encoded records, weighted by the table: the sufficient
statistics of a pairwise model (Wainwright & Jordan, "Graphical models, exponential families, and
variational inference", Found. Trends Mach. Learn. 1(1-2), 2008, Section 3.3, the overcomplete
indicator representation). The loss of a fit compares them entry by entry with the noisy answers laid out
the same way (weight 0 on the entries nothing measures).

Why: the 2-way marginals of a loopy model's large clique (NLTCS with every pair measured: 120 marginals of
one 65,536-cell table) were 120 reductions, each reading the whole table, and the gradient 120 more
broadcasts: about 240 compiled kernels. As matrix products they are a handful of kernels, and a loss with
its gradient runs several times faster (``bench/NOTES.md`` has the measurements).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from pgmjax.kernels import sum_axes

#: A clique table's marginals are computed as products only where more than this many are measured (as
#: many as :data:`pgmjax.compiler.LOOP_EMITTERS_MAX_REDUCTIONS`: fewer reductions compile and run cheaply).
MIN_MARGINALS = 9

#: At most this many entries in the one-hot matrices and in the products (their memory, and the loss's work).
MAX_ENTRIES = 2**22


@dataclass(frozen=True)
class PairLayout:
    """Where a clique table's one- and two-way marginals sit in the flat prediction (static, hashable).

    Attributes:
        shape: the host table's stored shape.
        split: its axes ``[:split]`` are ``L`` (rows of ``X``), the rest ``R``.
        blocks: which products the prediction holds, in order: ``"cross"`` (``A_L^T X A_R``), ``"left"``
            (``A_L^T diag(X 1) A_L``), ``"right"`` (``A_R^T diag(X^T 1) A_R``).
        marginals: how many measured marginals it holds (what separate reductions it stands for).
    """

    shape: tuple[int, ...]
    split: int
    blocks: tuple[str, ...]
    marginals: int = 0

    @property
    def left(self) -> int:
        return math.prod(self.shape[: self.split])

    @property
    def right(self) -> int:
        return math.prod(self.shape[self.split:])

    @property
    def n_left(self) -> int:
        return sum(self.shape[: self.split])

    @property
    def n_right(self) -> int:
        return sum(self.shape[self.split:])

    def block_shape(self, block: str) -> tuple[int, int]:
        return {"cross": (self.n_left, self.n_right), "left": (self.n_left, self.n_left),
                "right": (self.n_right, self.n_right)}[block]

    @property
    def rows(self) -> int:
        """Entries of the flat prediction."""
        return sum(math.prod(self.block_shape(b)) for b in self.blocks)

    def flops(self) -> int:
        """Multiply-adds of one prediction (its transpose costs about as much)."""
        lf, rt, nl, nr = self.left, self.right, self.n_left, self.n_right
        cost = {"cross": lf * rt * nl + nl * rt * nr, "left": lf * nl * nl, "right": rt * nr * nr}
        return sum(cost[b] for b in self.blocks)

    def onehot_entries(self) -> int:
        return self.left * self.n_left + self.right * self.n_right


def plan_layout(shape: Sequence[int], axes_measured: Sequence[tuple[int, ...]]) -> PairLayout | None:
    """The cheapest split of a table of ``shape`` for the marginals on ``axes_measured`` (each one or two
    axes of the table), or None where the products would cost more than the reductions they replace.

    Args:
        shape: the host table's stored shape (at least two axes).
        axes_measured: per measured marginal, the table axes it keeps (one or two, ascending).

    Returns:
        A :class:`PairLayout`, or None when fewer than :data:`MIN_MARGINALS` marginals are measured, the
        table has fewer than two axes, or no split keeps the products within :data:`MAX_ENTRIES` entries and
        16 multiply-adds per cell that the separate reductions would read.

    Example:
        >>> plan_layout((2,) * 6, [(i, j) for i in range(6) for j in range(i + 1, 6)]).split
        3
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) < 2 or len(axes_measured) < MIN_MARGINALS:
        return None
    best = None
    for split in range(1, len(shape)):
        blocks = set()
        for axes in axes_measured:
            left = [a < split for a in axes]
            blocks.add("cross" if any(left) and not all(left) else ("left" if all(left) else "right"))
        layout = PairLayout(shape, split, tuple(b for b in ("cross", "left", "right") if b in blocks), len(axes_measured))
        fits = max(layout.onehot_entries(), layout.rows) <= MAX_ENTRIES
        if fits and (best is None or layout.flops() < best.flops()):
            best = layout
    if best is None or best.flops() > 16 * len(axes_measured) * math.prod(shape):
        return None
    return best


def onehots(layout: PairLayout, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``(A_L, A_R)``: the one-hot design matrices of the two axis groups (host arrays of ``dtype``).

    Example:
        >>> a_l, a_r = onehots(PairLayout((2, 3), 1, ("cross",)), np.float32)
        >>> a_l.tolist(), a_r.shape
        ([[1.0, 0.0], [0.0, 1.0]], (3, 3))
    """

    def design(sizes: tuple[int, ...]) -> np.ndarray:
        cells = math.prod(sizes)
        out = np.zeros((cells, sum(sizes)), dtype)
        index = np.indices(sizes).reshape(len(sizes), cells)
        offset = 0
        for i, n in enumerate(sizes):
            out[np.arange(cells), offset + index[i]] = 1
            offset += n
        return out

    return design(layout.shape[: layout.split]), design(layout.shape[layout.split:])


def positions(layout: PairLayout, axes: tuple[int, ...]) -> np.ndarray:
    """Where each cell of the marginal on table axes ``axes`` (one or two, in the measurement's order; its
    cells row-major) sits in the flat prediction.

    Example:
        >>> positions(PairLayout((2, 2), 1, ("cross",)), (1, 0)).tolist()
        [0, 2, 1, 3]
    """
    split, shape = layout.split, layout.shape

    def offset(a: int) -> int:  # the attribute's first column in its side's one-hot matrix
        return sum(shape[split if a >= split else 0: a])

    starts, block_start = {}, 0
    for b in layout.blocks:
        starts[b] = block_start
        block_start += math.prod(layout.block_shape(b))
    if len(axes) == 1:
        (a,) = axes
        block = "left" if a < split else "right"
        width = layout.block_shape(block)[1]
        v = np.arange(shape[a])
        return starts[block] + (offset(a) + v) * width + offset(a) + v
    a, b = axes
    lo, hi = min(a, b), max(a, b)
    block = "cross" if lo < split <= hi else ("left" if hi < split else "right")
    width = layout.block_shape(block)[1]
    va, vb = np.meshgrid(np.arange(shape[a]), np.arange(shape[b]), indexing="ij")  # the measurement's order
    v_lo, v_hi = (va, vb) if a == lo else (vb, va)
    return (starts[block] + (offset(lo) + v_lo) * width + offset(hi) + v_hi).reshape(-1)


def predict(layout: PairLayout, table: jax.Array, onehot_left: jax.Array, onehot_right: jax.Array) -> jax.Array:
    """The flat prediction of a stack of tables ``(count, *layout.shape)``: ``(count, layout.rows)``.

    Linear in ``table``, so autodiff and ``jax.linear_transpose`` give its transpose (matrix products again).
    """
    count, split = table.shape[0], layout.split
    out = []
    for block in layout.blocks:
        if block == "cross":
            x = table.reshape(count, layout.left, layout.right)
            p = jnp.einsum("li,clr,rj->cij", onehot_left, x, onehot_right)
        elif block == "left":
            rows = sum_axes(table, tuple(range(1 + split, table.ndim))).reshape(count, layout.left)
            p = jnp.einsum("li,cl,lj->cij", onehot_left, rows, onehot_left)
        else:
            cols = sum_axes(table, tuple(range(1, 1 + split))).reshape(count, layout.right)
            p = jnp.einsum("ri,cr,rj->cij", onehot_right, cols, onehot_right)
        out.append(p.reshape(count, -1))
    return out[0] if len(out) == 1 else jnp.concatenate(out, axis=1)
