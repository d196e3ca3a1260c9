"""Which marginal oracle a fit uses: the exact junction tree, the approximate region graph, or whichever fits.

:func:`pgmjax.estimate`'s ``oracle=`` argument:

* ``"exact"`` (default): the junction-tree oracle (:mod:`pgmjax.graph.oracle`); a tree over the size limit
  raises :class:`~pgmjax.graph.size_limit.ModelTooLarge`.
* ``"approximate"``: convex generalized belief propagation on the measured cliques' region graph
  (:mod:`pgmjax.graph.approximate_oracle`; McKenna, Pradhan, Sheldon & Miklau, NeurIPS 2021), default
  :class:`ApproximateOracle` settings; or an :class:`ApproximateOracle` instance for other settings.
* ``"auto"``: the exact oracle where the junction tree fits the size limit
  (:mod:`pgmjax.graph.size_limit`), else the approximate one, saying which in the model's ``info`` and a
  warning.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import NamedTuple

from ..graph import approximate_oracle, oracle, path_scan
from ..graph.junction import junction_tree, maximal_cliques
from ..graph.routed_steps import pass_work, steps
from ..graph.size_limit import ModelTooLarge
from . import losses, memory
from .inputs import resolve_method
from .routed_losses import routable

#: The oracle names :func:`pgmjax.estimate` accepts.
ORACLES = ("exact", "approximate", "auto")


@dataclass(frozen=True)
class ApproximateOracle:
    """Settings of the approximate marginal oracle.

    Args:
        kind: ``"convex"`` (convex generalized belief propagation, the relaxed problem of NeurIPS 2021) or
            ``"bethe"`` (loopy belief propagation on the cliques' factor graph; exact on trees, may not
            converge on loopy models).
        iters: message-passing iterations per oracle call (from zero messages: the oracle is a function of
            the potentials, so the line search compares like with like).
        damping: each message's weight on its previous value, in ``[0, 1)``.

    Example:
        >>> ApproximateOracle(iters=50).kind
        'convex'
    """

    kind: str = "convex"
    iters: int = approximate_oracle.DEFAULT_ITERS
    damping: float = approximate_oracle.DEFAULT_DAMPING

    def __post_init__(self):
        from ..graph.region_graph import KINDS

        if self.kind not in KINDS:
            raise ValueError(f"ApproximateOracle: kind must be one of {KINDS}, got {self.kind!r}")
        if isinstance(self.iters, bool) or not isinstance(self.iters, int) or self.iters < 1:
            raise ValueError(f"ApproximateOracle: iters must be a positive integer, got {self.iters!r}")
        if not 0.0 <= float(self.damping) < 1.0:
            raise ValueError(f"ApproximateOracle: damping must be in [0, 1), got {self.damping!r}")


def check_oracle(value, estimator, loss, *, caller: str = "estimate"):
    """``value`` checked: ``"exact"``, ``"auto"`` or an :class:`ApproximateOracle` (``"approximate"`` gives the
    default one). The approximate oracle needs an estimator that runs on it (mirror descent:
    :attr:`pgmjax.estimation.contract.Traits.approximate_oracle`) and the ``"l2"`` or ``"l1"`` loss.

    Example:
        >>> check_oracle("approximate", pj.MirrorDescent(), "l2")
        ApproximateOracle(kind='convex', iters=100, damping=0.5)
    """
    if value == "approximate":
        value = ApproximateOracle()
    if not (value in ("exact", "auto") or isinstance(value, ApproximateOracle)):
        raise ValueError(f"{caller}: oracle must be one of {ORACLES} or a pgmjax ApproximateOracle, got {value!r}")
    if value != "exact":
        if not estimator.traits.approximate_oracle:
            raise ValueError(f"{caller}: oracle={value!r} needs method='mirror_descent' (got {resolve_method(estimator)[1]!r}): the other "
                             "estimators differentiate the exact oracle")
        if callable(loss):
            raise ValueError(f"{caller}: oracle={value!r} needs the 'l2' or 'l1' loss, not a callable one")
    return value


def make_oracle_plan(domain, cliques, choice, *, caller: str = "estimate", dtype=None):
    """The plan of the chosen oracle over ``cliques``, and the ``info`` saying which was taken.

    ``"auto"`` takes the exact oracle where its fit fits the size limit at its peak (mirror descent's copies in
    ``dtype``: :func:`pgmjax.estimation.memory.check_fit`), not merely where one copy of the junction tree does: a tree
    whose fit would then be refused is given to the approximate oracle instead.

    Returns:
        ``(plan, info)``: an :class:`~pgmjax.graph.oracle_plan.OraclePlan` (exact) or an
        :class:`~pgmjax.graph.approximate_oracle.ApproximatePlan`, and None for ``"exact"``, else
        ``{"oracle": "exact" | "approximate", "reason": ..., ...}``.
    """
    if choice == "exact":
        return oracle.make_plan(domain, cliques), None
    reason = "oracle='approximate'"
    if choice == "auto":
        try:
            plan = oracle.make_plan(domain, cliques)
            memory.check_fit(domain, cliques, "mirror_descent", dtype, caller)  # "auto" needs mirror descent
            return plan, {"oracle": "exact", "reason": "auto: the junction tree's fit fits the size limit"}
        except ModelTooLarge as e:
            reason = f"auto: the junction tree is over the size limit ({e})"
            warnings.warn(f"{caller}: the exact oracle's junction tree is over the size limit; fitting with the "
                          "approximate oracle (convex generalized belief propagation): its answers are pseudo-marginals",
                          stacklevel=3)
            choice = ApproximateOracle()
    plan = approximate_oracle.make_approximate_plan(domain, cliques, choice.kind, choice.iters, choice.damping)
    return plan, {"oracle": "approximate", "kind": choice.kind, "iters": choice.iters, "damping": choice.damping,
                  "regions": len(plan.graph.regions), "reason": reason}


#: The programs :func:`pgmjax.estimate` accepts (``program=``).
PROGRAMS = ("auto", "dense", "size_class", "paths")

class RoutedCost(NamedTuple):
    """Seconds a size-class oracle call costs on one platform: per window cell read (``cell``), per loop step
    (``step``: a step's kernels and the loop's trip) and per measurement pair (``pair``: a cell of a measured
    clique's host, gathered and summed into its measured cell, forward and transposed)."""

    cell: float
    step: float
    pair: float


#: The size-class program's cost per oracle call on each platform, calibrated with
#: ``python -m bench.size_class --iteration 10:10 adult_mst nltcs_2way chain100`` (trees of pairs, the engine
#: benchmark's problems; ``bench/results/engine/size_class_iteration_*``): on a CPU the passes' time follows the
#: window cells they read; on a GPU the loop's steps, whatever the window; on both, the measurement pairs. The CPU's
#: were fitted before a level's pairs were read window by window, and overstate those passes; a refit
#: to them moved one of AIM's fits to the size class and left its run's time as it was, so they were kept
#: (``bench/NOTES.md``). Since the size-class programs compile with the fusion emitters and read padded
#: windows by a masked gather, their passes take 0.50 of the time per window cell, 0.86 per step and 0.59 per
#: pair (least squares over the same problems and six of AIM's models, before and after, on one machine), and
#: the CPU's constants were scaled by those ratios.
ROUTED_COSTS = {"cpu": RoutedCost(cell=20e-9, step=1.7e-6, pair=5.1e-9), "gpu": RoutedCost(cell=0.0, step=100e-6, pair=1e-9)}

class CompileCost(NamedTuple):
    """Seconds a process waits for a fit's programs to compile (tracing, lowering and XLA), for one method: the
    dense program's grow with its plan's block axes (:func:`dense_axes`) and with its groups of measurements
    (:func:`pgmjax.estimation.losses.reduction_groups`: each a reduction of a table, written into the program),
    ``dense_base + dense_per_axis * axes + dense_per_group * groups`` (:meth:`dense`); the size-class program's do
    not, the routing being data (``size_class``, once per class)."""

    dense_base: float
    dense_per_axis: float
    dense_per_group: float
    size_class: float

    def dense(self, axes: int, groups: int) -> float:
        """The dense program's expected compile, in seconds, for a plan of ``axes`` block axes whose measurements
        form ``groups`` groups.

        Example:
            >>> CompileCost(0.5, 0.1, 0.05, 2.0).dense(axes=10, groups=20)
            2.5
        """
        return self.dense_base + self.dense_per_axis * axes + self.dense_per_group * groups


#: Each method's compile costs, measured with ``python -m bench engine compile_costs`` (fresh processes: trees of
#: pairs, AIM-style models and the models of an AIM and an MWEM run; ``bench/results/engine/compile_costs_cpu.md``) on a CPU:
#: the dense plane fitted by least squares where the choice falls, the size class's the median of its points. A
#: GPU compiles both programs more slowly; the ratio, which is what ``program="auto"`` weighs, is taken to be the
#: CPU's. The groups of measurements count beside the block axes: fitted to the axes alone (the trees of pairs,
#: where the two grow together), the dense compile of an AIM run's last models had been underestimated, and
#: fitted to AIM's models alone, whose groups grow with their axes, the axes were undercounted instead, so the
#: points include models of an MWEM run (``bench/NOTES.md`` has the figures).
COMPILE_COSTS = {"mirror_descent": CompileCost(0.075, 0.0506, 0.0398, 2.06),
                 "dual_averaging": CompileCost(-0.159, 0.1043, 0.0532, 2.57),
                 "lbfgs": CompileCost(0.324, 0.1477, 0.1805, 8.06)}


#: ``program="auto"`` takes the size-class program only for models of at most this many junction-tree cells: past
#: it a dense iteration is the faster by more than a compile is worth, and the fit's memory is what
#: :mod:`pgmjax.estimation.memory` counts for the dense program.
SIZE_CLASS_MAX_CELLS = 2**20


def check_program(value, *, caller: str = "estimate") -> str:
    """``value`` checked: one of :data:`PROGRAMS`.

    Example:
        >>> check_program("size_class")
        'size_class'
    """
    if value not in PROGRAMS:
        raise ValueError(f"{caller}: program must be one of {PROGRAMS}, got {value!r}")
    return value


def uses_size_class(program: str, domain, cliques, measurements, loss, iters: int, *, method="mirror_descent",
                    oracle_choice="exact", devices: int = 1, platform: str = "cpu", structures: int = 1,
                    repeats: int = 1, caller: str = "estimate") -> bool:
    """Whether a fit runs the size-class program (:mod:`pgmjax.graph.routed_oracle`), one compiled program per size
    class, rather than the dense one compiled per structure (:mod:`pgmjax.graph.oracle`).

    ``method`` is a name or an :class:`~pgmjax.Estimator`, whose :class:`~pgmjax.estimation.contract.Traits` say
    whether it runs the size class and what its iteration costs. ``"size_class"`` needs one of pgmjax's methods
    (L-BFGS on a differentiable plan, :func:`pgmjax.graph.routed_plan.make_routed_plan`), the exact oracle on one device, measurements
    that are all marginals and the ``"l2"`` or ``"l1"`` loss (a ValueError names what is missing); ``"dense"``
    never. ``"auto"`` takes it where those hold, the junction tree has at most :data:`SIZE_CLASS_MAX_CELLS` cells
    and the size-class fit is expected to end sooner, first call included: its compile
    (:data:`COMPILE_COSTS`, counted as if its class were new to the process, a ``1/structures`` share of it where
    the caller says it fits that many structures) and its routed passes on ``platform``
    (the fit's device's, ``jax.Device.platform``; :func:`routed_seconds` times ``iters``, the iterations the fit is
    expected to run) at most the dense program's compile, which grows with its plan's blocks and their axes
    (:func:`dense_axes`) and its groups of measurements (:meth:`CompileCost.dense`; a ``1/repeats`` share of it where
    the caller says it fits this structure that many
    times: a structure fitted again and again goes dense, a new one each time, of few iterations, the size class).
    The dense fit's own iterations are not counted (they are the faster), so a close call goes to the dense
    program. A fit of a few
    clique shapes therefore runs dense (its compile is the shorter), a fit of many the size class.

    Example:
        >>> import numpy as np
        >>> from pgmjax import Domain, Measurement
        >>> def chain(n):  # n pairs of many shapes over n + 1 attributes
        ...     dom = Domain({f"a{i}": 2 + i % 5 for i in range(n + 1)})
        ...     ms = [Measurement(c, np.ones(dom.shape_of(c))) for c in zip(dom.attributes, dom.attributes[1:])]
        ...     return dom, [m.clique for m in ms], ms
        >>> [uses_size_class("auto", *chain(n), "l2", 1000) for n in (3, 40)]
        [False, True]
    """
    estimator, name = resolve_method(method, caller)
    missing = []
    if not estimator.traits.size_class:  # an estimator of one's own: the dense program
        missing.append(f"method 'mirror_descent', 'dual_averaging' or 'lbfgs' (method={name!r})")
    if oracle_choice != "exact":
        missing.append(f"the exact oracle (oracle={oracle_choice!r})")
    if devices != 1:
        missing.append(f"one device (devices={devices})")
    if callable(loss):
        missing.append("the 'l2' or 'l1' loss, not a callable one")
    if not routable(measurements):
        missing.append("measurements that are all marginals (identity queries)")
    if program == "size_class" and missing:
        raise ValueError(f"{caller}: program='size_class' needs " + "; ".join(missing))
    if program != "auto" or missing:
        return program == "size_class"
    tree = junction_tree(domain, maximal_cliques(domain, cliques))
    if tree.cells > SIZE_CLASS_MAX_CELLS:
        return False
    cost = COMPILE_COSTS[name]
    passes = routed_seconds(domain, tree, measurements, platform) * estimator.traits.oracle_calls * max(int(iters), 1)
    dense_plan = oracle.make_plan(domain, cliques)  # cached: the dense fit's own plan, if it runs
    groups = losses.reduction_groups(dense_plan, measurements)
    return cost.size_class / structures + passes <= cost.dense(dense_axes(dense_plan), groups) / repeats


def dense_axes(plan) -> int:
    """The dense plan's size as its program sees it: the axes of its blocks, summed (cliques of one shape stack
    into one block; each block's every axis is code: its passes' reductions, transposes and broadcasts). The dense
    compile grows about linearly with it (:data:`COMPILE_COSTS`), where the number of cliques says little (a chain
    of 1,000 pairs of one shape is a few blocks).

    Example:
        >>> from pgmjax import Domain
        >>> from pgmjax.graph.oracle_plan import make_plan
        >>> dom = Domain({f"a{i}": 3 for i in range(100)})
        >>> dense_axes(make_plan(dom, [(f"a{i}", f"a{i + 1}") for i in range(99)])) < 20
        True
    """
    return sum(len(shape) - 1 for _, shape in plan.units)


#: ``program="auto"`` takes the path scan on a GPU only where the scanned runs' separators have at most this many cells:
#: the scan's ``separator x separator`` log-semiring products (taken term by term where float32 would underflow, as
#: fitted potentials soon make them) outgrow the launches they save on larger separators
#: (``bench/results/engine/path_scan_*``).
PATHS_AUTO_SEPARATOR = 16


def uses_paths(program: str, domain, cliques, *, oracle_choice="exact", devices: int = 1, platform: str = "cpu",
               caller: str = "estimate") -> bool:
    """Whether a dense fit passes its junction tree's long paths by an associative scan
    (:mod:`pgmjax.graph.path_scan`; :func:`pgmjax.graph.oracle.make_plan`'s ``paths``).

    ``"paths"`` needs the exact oracle on one device (a ValueError names what is missing); ``"auto"`` takes it on a
    GPU (``platform`` ``"gpu"``) where the dense plan has a run the scan passes (a chain or a bundle of paths of at
    least :data:`pgmjax.graph.path_scan.PATH_MIN_LEVELS` levels) with separators of at most
    :data:`PATHS_AUTO_SEPARATOR` cells: there the level loop waits on kernel launches, one
    per level, and the scan launches about ``2 log2`` of the levels' count. On a CPU the loop's launches are cheap and
    the scan's ``separator^3`` products are not: ``"auto"`` keeps the loop. ``"dense"`` and ``"size_class"``: never.

    Example:
        >>> from pgmjax import Domain
        >>> dom = Domain({f"a{i}": 2 for i in range(40)})
        >>> chain = [(f"a{i}", f"a{i + 1}") for i in range(39)]
        >>> uses_paths("auto", dom, chain, platform="gpu"), uses_paths("auto", dom, chain, platform="cpu")
        (True, False)
    """
    if program == "paths":
        missing = [f"the exact oracle (oracle={oracle_choice!r})"] if oracle_choice != "exact" else []
        missing += [f"one device (devices={devices})"] if devices != 1 else []
        if missing:
            raise ValueError(f"{caller}: program='paths' needs " + "; ".join(missing))
        return True
    if program != "auto" or oracle_choice != "exact" or devices != 1 or platform != "gpu":
        return False
    plan = oracle.make_plan(domain, cliques)
    scanned = path_scan.scanned_runs(plan)
    return bool(scanned) and max(path_scan.separator_cells(cl) for r in scanned for cl in plan.runs[r].classes) <= PATHS_AUTO_SEPARATOR


def routed_seconds(domain, tree, measurements, platform: str) -> float:
    """Expected seconds of one size-class oracle call and the measurements' routing, for the junction tree
    ``tree`` on ``platform`` (``"cpu"``, ``"gpu"``; others are costed as a GPU): :data:`ROUTED_COSTS`.

    Example:
        >>> import numpy as np
        >>> from pgmjax import Domain, Measurement
        >>> dom = Domain({"a": 2, "b": 3})
        >>> m = Measurement(("a", "b"), np.ones((2, 3)), stddev=1.0)
        >>> tree = junction_tree(dom, [("a", "b")])
        >>> routed_seconds(dom, tree, [m], "cpu") < 1e-3
        True
    """
    _, width, chunks = steps(tree, platform)
    cost = ROUTED_COSTS.get(platform, ROUTED_COSTS["gpu"])
    pairs = sum(domain.size(tree.cliques[tree.containing(m.clique)]) for m in measurements)
    trips, cells = pass_work(width, chunks, platform)
    return trips * cost.step + cost.cell * cells + cost.pair * pairs


def choose_plan(domain, cliques, measurements, loss, estimator, choice, dtype, *, program: str, devices: int,
                structures: int, repeats: int, expected_iters: int, caller: str = "estimate"):
    """The plan a fit's compiled program runs on, chosen once from the fit's explicit arguments: the approximate
    oracle's region graph (where ``choice`` takes it), the size-class plan (:func:`uses_size_class`), the dense plan
    with path scans (:func:`uses_paths`), a plan split over ``devices``, or None (the dense plan, which
    :func:`pgmjax.estimation.inputs.build_problem` makes).

    Returns:
        ``(plan, info)``: ``info`` says which oracle ``choice`` took (None for ``"exact"``).
    """
    from .. import compiler
    from ..graph import oracle_plan
    from ..graph.routed_plan import make_routed_plan

    program = check_program(program, caller=caller)
    plan, info = (None, None) if choice == "exact" else make_oracle_plan(domain, cliques, choice, dtype=dtype)
    exact = choice == "exact" or (info is not None and info["oracle"] == "exact")  # "auto" may pick it
    taken = "exact" if exact else choice
    platform = compiler.backend()
    if uses_size_class(program, domain, cliques, measurements, loss, expected_iters, method=estimator,
                       oracle_choice=taken, devices=devices, platform=platform, structures=structures,
                       repeats=repeats, caller=caller):
        # an estimator that differentiates its loss through the oracle (L-BFGS): the passes scan over the levels
        plan = make_routed_plan(domain, cliques, differentiable=estimator.traits.gradient_through_oracle,
                                platform=platform)
    elif uses_paths(program, domain, cliques, oracle_choice=taken, devices=devices, platform=platform, caller=caller):
        plan = oracle_plan.make_plan(domain, cliques, paths=True)
    if devices > 1:
        plan = oracle_plan.make_plan(domain, cliques, shards=devices)
    return plan, info

