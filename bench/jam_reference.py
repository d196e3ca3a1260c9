"""JAM as it ships in mbi's repository, run on mbi 2.0.0: the reference half of ``bench.public_data``.

JAM (Fuentes, Mullins, McKenna, Miklau & Sheldon, "Joint selection: adaptively incorporating public information for
private synthetic data", AISTATS 2024) is ``mechanisms/jam.py`` of github.com/ryan112358/private-pgm; its base class
is ``mechanisms/mechanism.py`` (which imports ``mechanisms/cdp2adp.py``). This driver exports those files, unchanged,
from a git mirror of the repository at a given commit (``--source``, default the local mirror; ``--commit``, default
``HEAD``) into a temporary folder with ``git archive`` (read only), imports them from there as the top-level modules
``cdp2adp``, ``mechanism`` and ``jam`` (by file location, each registered under its own name so that their
``from mechanism import Mechanism`` finds it, as in the repository's folder) and runs
``JAM(epsilon, delta, prng, rounds=..., size_limit=..., optim_iters=...).run(private, public, workload)``, with
mbi 2.0.0 (pip) as the library. ``--mechanism aim`` runs the repository's ``mechanisms/aim.py`` the same way
(``AIM(epsilon, delta, rounds=..., max_model_size=..., max_iters=...).run(private, workload)``).

The repository's ``src/mbi`` at the same commit does not run on jax 0.10.2 (its ``Factor`` arithmetic fails under
``jit``: ``chex.Numeric`` no longer matches a tracer, so ``Factor + tracer`` looks for ``tracer.domain``), so the
library is mbi 2.0.0, whose API differs in what ``jam.py`` calls. What this driver changes, and nothing else:

1. ``matplotlib``: ``cdp2adp.py`` imports ``matplotlib.pyplot`` and never uses it; where matplotlib is not installed
   an empty stand-in module is registered before the import.
2. ``mbi.estimation.mirror_descent(domain, measurements, known_total=, potentials=, iters=, callback_fn=)`` (the HEAD
   function ``jam.py`` and ``aim.py`` call; mbi 2.0.0 has none) is provided, on the ``mbi.estimation`` module, as
   ``MirrorDescent().estimate(domain, measurements, known_total=known_total, iters=iters, warm_start=potentials)``:
   mbi 2.0.0's mirror descent with Armijo line search (as HEAD's; its first step is ``2 / (L N)`` against HEAD's
   ``2 / N``, and it runs in blocks of 50 iterations), the same loss ``1/2 sum ||(mu - y) / sigma||^2``, the total
   estimated the same way from the measurements where ``known_total`` is None (as ``jam.py`` leaves it).
3. The model that shim returns answers ``project(clique)`` (which ``jam.py`` calls for every candidate in every
   round) through a faster exact route (:class:`FastMarginals`, numpy float64): the junction tree's calibrated clique
   marginals (sum-product over mbi's ``make_junction_tree`` of the model's cliques, on its potentials expanded to the
   tree's cliques, as mbi's own ``MarkovRandomField.synthetic_data`` does with ``message_passing_stable``), then, for
   a pair no tree clique holds, the product of the conditionals along the tree path between the two attributes.
   mbi's own ``project`` runs ``variable_elimination``, jitted per (model structure, clique): about 100 programs
   compiled per round (about 13 s a round early on, more later; 30 rounds on Adult take about 9 minutes per run,
   two-thirds of it there). ``--check K`` compares up to ``K`` candidates per fitted model, chosen at random, with
   mbi's own ``MarkovRandomField.project`` and reports the largest absolute difference (counts). Everything else
   (``potentials``, ``synthetic_data``, ``total``) is mbi's model itself, and ``cliques`` is its potentials' cliques
   as a list, as HEAD's model gives them (mbi 2.0.0 gives a tuple, to which ``aim.py`` cannot append a list).
4. Seeding: ``JAM.__init__`` (and ``AIM.__init__``) call ``Mechanism.__init__(epsilon, delta, prng)``, whose third
   parameter is ``bounded``: the ``prng`` lands there and ``self.prng`` stays ``numpy.random`` (the module). The
   driver passes ``prng=numpy.random.default_rng(seed)`` as ``jam.py``'s own ``__main__`` does and seeds the global
   state with ``numpy.random.seed(seed)``, which is what the mechanism's noise, its exponential mechanism and mbi's
   ``synthetic_data`` (randomised rounding) draw from.
5. Not an adaptation but a condition of reproducing a run: ``jam.py``'s candidates come from
   ``downward_closure``, which sorts a set of cliques by length only, so their order, and with it which candidate a
   draw of the exponential mechanism lands on, follows Python's string hashing. A run is reproducible only with
   ``PYTHONHASHSEED`` fixed (``bench.public_data`` sets it to the seed); the row records it.
6. The data: mbi 2.0.0's ``Dataset`` takes a ``{attribute: column}`` mapping (``jam.py``'s ``__main__`` reads CSVs with
   HEAD's ``Dataset.load``, not used here); the workload (``jam.py``'s ``all_k_way(attrs, degree)``) is given by the
   caller: all 2-way marginals.

JAM prints one line per round (``Measuring Clique (...) (PRIV|PUB) - Round t/T ... Budget Used=x/rho``); the driver
captures them and reports the rounds, which marginals were taken from the public table, and the budget used at the
end. It writes the final model's log-potentials (one table per clique, axes in the clique's order) and JAM's synthetic
records (``final_model.synthetic_data(rows=N)``, mbi's randomised rounding) to an ``.npz``, and a JSON row (timings,
the round log, the check) to ``--result``.

Runs in an interpreter with ``mbi==2.0.0`` (``/tmp/v_mbi2/bin/python``; pgmjax need not be installed): this module
imports only the standard library, numpy, jax, mbi and the standard-library-only :mod:`bench.schema` (the exported
reference files import scipy, as they do in the repository). Started by ``bench.public_data`` from the repository root as ``python -m bench.jam_reference``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import types
import warnings

import numpy as np

from bench import schema

MIRROR = "/work/.mirror/ryan112358+private-pgm/repo"
#: The reference files exported from the repository (unchanged).
FILES = ("mechanisms/jam.py", "mechanisms/mechanism.py", "mechanisms/cdp2adp.py", "mechanisms/aim.py")
ROUND_LINE = re.compile(r"Measuring Clique (\(.*?\)) \((PRIV|PUB)\) - Round (\d+)/(\d+) Meas_Sigma=(\S+) "
                        r"Sel_Eps=(\S+) Budget Used=(\S+)/(\S+)")


def _git(source: str, *args) -> str:
    return subprocess.run(["git", f"--git-dir={source}", *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def export(source: str, commit: str, folder: str) -> dict:
    """Export :data:`FILES` at ``commit`` of the git directory ``source`` into ``folder`` (``git archive``, read
    only); returns the commit's hash and date and each file's blob hash."""
    sha = _git(source, "rev-parse", f"{commit}^{{commit}}")
    data = subprocess.run(["git", f"--git-dir={source}", "archive", sha, *FILES], capture_output=True,
                          check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(folder, filter="data")
    return {"source": source, "commit": sha, "commit_date": _git(source, "log", "-1", "--format=%cI", sha),
            "blobs": {f: _git(source, "rev-parse", f"{sha}:{f}") for f in FILES}}


def load_reference(folder: str, names) -> dict:
    """Import ``<folder>/mechanisms/<name>.py`` for each name, in order, as the top-level module ``name`` (registered in
    ``sys.modules``, so a later file's ``from mechanism import Mechanism`` finds the earlier one)."""
    import importlib.util

    out = {}
    for name in names:
        spec = importlib.util.spec_from_file_location(name, os.path.join(folder, "mechanisms", f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        out[name] = module
    return out


def _stub_matplotlib() -> bool:
    """Register an empty ``matplotlib.pyplot`` where matplotlib is not installed (cdp2adp.py imports, never uses it)."""
    try:
        import importlib

        importlib.import_module("matplotlib.pyplot")
        return False
    except ImportError:
        mpl = types.ModuleType("matplotlib")
        mpl.pyplot = types.ModuleType("matplotlib.pyplot")
        sys.modules["matplotlib"], sys.modules["matplotlib.pyplot"] = mpl, mpl.pyplot
        return True


def versions() -> dict:
    import platform

    return {"python": platform.python_version(),
            **{name: schema.version(name) for name in ("mbi", "jax", "jaxlib", "numpy", "scipy")}}


# ----------------------------------------------------------------------------- exact marginals, faster
def _letters(attrs, names) -> str:
    return "".join(names[a] for a in attrs)


def _sum_to(attrs, table, keep):
    """``table`` over ``attrs`` summed to the attributes of ``keep`` present (in ``attrs``' order)."""
    drop = tuple(i for i, a in enumerate(attrs) if a not in keep)
    return tuple(a for a in attrs if a in keep), (table.sum(axis=drop) if drop else table)


class FastMarginals:
    """Exact marginals of an mbi model on any clique: calibrated junction-tree marginals, then conditionals along
    the tree path for a clique no tree clique holds (module docstring, item 3)."""

    def __init__(self, model):
        from mbi import junction_tree

        domain = model.domain
        jtree, _ = junction_tree.make_junction_tree(domain, [tuple(c) for c in model.cliques])
        nodes = [tuple(c) for c in jtree.nodes]
        self.adj = {c: [tuple(n) for n in jtree.neighbors(c)] for c in nodes}
        self.nodes = nodes
        self.names = {a: chr(ord("a") + i) if i < 26 else chr(ord("A") + i - 26)
                      for i, a in enumerate(domain.attributes)}
        self.domain = domain
        self.tables = self._calibrate(model.potentials.expand(nodes), float(model.total))

    def _calibrate(self, potentials, total: float) -> dict:
        """Each tree clique's marginal (counts summing to ``total``): sum-product on the junction tree in log space,
        numpy float64 (what mbi's ``message_passing_stable`` computes, without compiling a program per model)."""
        logp = {}
        for c in self.nodes:
            f = potentials[c]
            own = list(f.domain.attributes)
            logp[c] = np.transpose(np.asarray(f.datavector(flatten=False), np.float64), [own.index(a) for a in c])
        messages = {}

        def send(src, dst):  # log-message from src to dst over their separator, in src's attribute order
            sep = tuple(x for x in src if x in dst)
            t = logp[src].copy()
            for n in self.adj[src]:
                if n != dst:
                    t = t + self._align(messages[(n, src)], src)
            drop = tuple(i for i, x in enumerate(src) if x not in sep)
            m = t.max(axis=drop, keepdims=True) if drop else t
            m = np.where(np.isfinite(m), m, 0.0)
            out = np.log(np.exp(t - m).sum(axis=drop, keepdims=True)) + m if drop else t
            messages[(src, dst)] = (sep, np.squeeze(out, axis=drop) if drop else out)

        seen = set()
        for root in self.nodes:  # every tree of the forest
            if root in seen:
                continue
            order, parent, frontier = [root], {root: None}, [root]
            while frontier:
                nxt = []
                for c in frontier:
                    for n in self.adj[c]:
                        if n not in parent:
                            parent[n] = c
                            order.append(n)
                            nxt.append(n)
                frontier = nxt
            seen.update(order)
            for c in reversed(order[1:]):  # leaves up
                send(c, parent[c])
            for c in order:  # root down
                for n in self.adj[c]:
                    if parent.get(n) == c:
                        send(c, n)
        tables = {}
        for c in self.nodes:
            t = logp[c]
            for n in self.adj[c]:
                t = t + self._align(messages[(n, c)], c)
            t = np.exp(t - t.max())
            tables[c] = t * (total / t.sum())
        return tables

    @staticmethod
    def _align(message, attrs):
        """A message ``(sep, table)`` broadcast against a table over ``attrs``."""
        sep, table = message
        order = [x for x in attrs if x in sep]
        table = np.transpose(table, [sep.index(x) for x in order])
        return table.reshape([table.shape[order.index(x)] if x in sep else 1 for x in attrs])

    def _path(self, clique):
        """The shortest tree path from a clique holding ``clique[0]`` to one holding ``clique[1]`` (None if the two
        lie in different trees of the forest)."""
        a, b = clique
        sources = [c for c in self.nodes if a in c]
        prev = {c: None for c in sources}
        frontier = list(sources)
        while frontier:
            nxt = []
            for c in frontier:
                if b in c:
                    path = [c]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1]
                for n in self.adj[c]:
                    if n not in prev:
                        prev[n] = c
                        nxt.append(n)
            frontier = nxt
        return None

    def _conditional(self, node, given, target):
        """``P(target | given)`` from the tree clique ``node``: a table over ``given + target`` (in that order)."""
        order = tuple(given) + tuple(x for x in target if x not in given)
        attrs, joint = _sum_to(node, self.tables[node], set(order))
        joint = np.transpose(joint, [attrs.index(x) for x in order])
        if not given:
            return order, joint / joint.sum()
        den = joint.sum(axis=tuple(range(len(given), len(order))), keepdims=True)
        return order, np.where(den > 0, joint / np.where(den > 0, den, 1.0), 0.0)

    def marginal(self, clique) -> np.ndarray:
        """The model's counts on ``clique`` (axes in its order): from one tree clique where one holds it, else (a
        pair) along the tree path between the two attributes' cliques."""
        clique = tuple(clique)
        want = set(clique)
        for c in self.nodes:
            if want <= set(c):
                attrs, t = _sum_to(c, self.tables[c], want)
                return np.transpose(t, [attrs.index(x) for x in clique])
        if len(clique) != 2:
            raise NotImplementedError("FastMarginals answers a clique inside a tree clique, or a pair")
        a, b = clique
        path = self._path(clique)
        if path is None:  # different trees of the forest: independent
            pa = self.marginal((a,))
            pb = self.marginal((b,))
            return np.outer(pa, pb) / pa.sum()
        first = path[0]
        sep = tuple(x for x in first if x in path[1])
        attrs, phi = _sum_to(first, self.tables[first], {a, *sep})  # counts over a and the first separator
        for i in range(1, len(path)):
            node = path[i]
            prev_sep = tuple(x for x in attrs if x != a)
            target = (b,) if i == len(path) - 1 else tuple(x for x in node if x in path[i + 1])
            c_attrs, cond = self._conditional(node, prev_sep, target)
            out = (a,) + tuple(target)
            spec = (f"{_letters(attrs, self.names)},{_letters(c_attrs, self.names)}->"
                    f"{_letters(out, self.names)}")
            phi = np.einsum(spec, phi, cond, optimize=True)
            attrs = out
        return np.transpose(phi, [attrs.index(x) for x in clique])

    def factor(self, clique):
        from mbi import Factor

        clique = (clique,) if isinstance(clique, str) else tuple(clique)
        return Factor(self.domain.project(clique), np.asarray(self.marginal(clique), np.float32))


class FastModel:
    """mbi 2.0.0's model, with ``project`` answered by :class:`FastMarginals` (computed once per model, on the first
    call); every other attribute is the model's own."""

    def __init__(self, model, mbi, stats: dict, check: int, rng):
        self._model, self._mbi, self._stats, self._check, self._rng = model, mbi, stats, check, rng
        self._fast = None
        self._checked = 0

    def __getattr__(self, name):
        return getattr(self._model, name)

    def __bool__(self):
        return True

    @property
    def cliques(self) -> list:
        """The potentials' cliques as a list, as HEAD's ``MarkovRandomField.cliques`` gives them (mbi 2.0.0: a tuple;
        ``aim.py`` appends to it with ``model.cliques + [cl]``)."""
        return list(self._model.cliques)

    def project(self, attrs):
        t = time.perf_counter()
        if self._fast is None:
            self._fast = FastMarginals(self._model)
        try:
            out = self._fast.factor(attrs)
        except NotImplementedError:  # a clique of 3 or more no tree clique holds: mbi's own route
            out = self._model.project(attrs)
        self._stats["project_s"] += time.perf_counter() - t
        self._stats["projects"] += 1
        if self._checked < self._check and self._rng.random() < 0.25:
            self._checked += 1
            own = np.asarray(self._model.project(attrs).datavector(), np.float64)
            diff = float(np.abs(own - np.asarray(out.datavector(), np.float64)).max())
            self._stats["check_max_abs"] = max(self._stats["check_max_abs"], diff)
            self._stats["checks"] += 1
        return out


def install(mbi, jax, stats: dict, check: int, seed: int):
    """Provide HEAD's ``mbi.estimation.mirror_descent`` on mbi 2.0.0 (module docstring, item 2)."""
    from mbi import estimation

    rng = np.random.default_rng(10_000 + seed)  # the check's own choices: not the mechanism's stream

    def mirror_descent(domain, loss_fn, *, known_total=None, potentials=None, iters=1000, callback_fn=None, **other):
        if other:
            raise TypeError(f"mirror_descent shim: arguments not supported: {sorted(other)}")
        t = time.perf_counter()
        model = estimation.MirrorDescent().estimate(domain, loss_fn, known_total=known_total, iters=iters,
                                                    warm_start=potentials)
        jax.block_until_ready(model)
        stats["fit_s"] += time.perf_counter() - t
        stats["fits"] += 1
        return FastModel(model, mbi, stats, check, rng)

    estimation.mirror_descent = mirror_descent


def parse_rounds(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        m = ROUND_LINE.search(line)
        if m:
            clique = list(eval(m.group(1), {"__builtins__": {}}))  # a printed tuple of attribute names
            out.append({"round": int(m.group(3)), "clique": clique, "source": "public" if m.group(2) == "PUB"
                        else "private", "sigma": float(m.group(5)), "em_epsilon": float(m.group(6)),
                        "rho_used": float(m.group(7)), "rho": float(m.group(8))})
    return out


def replay_budget(jam, mech, rounds: list[dict]) -> float:
    """The budget JAM had used at the end (its ``rho_used``, a local of ``run``; the log prints 3 digits): replayed
    with jam.py's own ``adaptive_split`` from the rounds' sources (a private round spends selection and measurement,
    a public one the selection only)."""
    used = 0.0
    for t, r in enumerate(rounds):
        select, measure = jam.adaptive_split(mech.rho, used, mech.rounds, t, mech.alpha)
        used += select + (measure if r["source"] == "private" else 0.0)
    return float(used)


def parse_aim(text: str) -> list[dict]:
    """mbi's AIM prints ``Budget Used x / rho`` then ``Measuring Clique (...)`` per round."""
    out, used = [], None
    for line in text.splitlines():
        if line.startswith("Budget Used"):
            parts = line.split()
            used = (float(parts[2]), float(parts[4]))
        elif line.startswith("Measuring Clique"):
            clique = list(eval(line[len("Measuring Clique "):], {"__builtins__": {}}))
            out.append({"round": len(out) + 1, "clique": clique, "source": "private",
                        "rho_used": used[0] if used else None, "rho": used[1] if used else None})
    return out


class _Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, s):
        for st in self.streams:
            st.write(s)
        return len(s)

    def flush(self):
        for st in self.streams:
            st.flush()


def run(args) -> dict:
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="JAX is running in float32")
        import mbi
    from mbi import Dataset, Domain

    folder = tempfile.mkdtemp(prefix="jam_reference_")
    if args.jam_dir:
        exported = {"source": os.path.abspath(args.jam_dir), "commit": None, "blobs": None}
        base = args.jam_dir
    else:
        exported = export(args.source, args.commit, folder)
        base = folder
    stubbed = _stub_matplotlib()
    reference = load_reference(base, ("cdp2adp", "mechanism", args.mechanism))
    shutil.rmtree(folder, ignore_errors=True)
    stats = {"fit_s": 0.0, "fits": 0, "project_s": 0.0, "projects": 0, "check_max_abs": 0.0, "checks": 0}
    install(mbi, jax, stats, args.check, args.seed)

    with open(args.meta) as f:
        meta = json.load(f)
    attrs = list(meta["domain"])
    domain = Domain(attrs, [int(meta["domain"][a]) for a in attrs])

    def dataset(path):
        rec = np.load(path)
        return Dataset({a: rec[:, i].astype(np.int64) for i, a in enumerate(attrs)}, domain)

    private = dataset(meta["private"])
    workload = list(itertools.combinations(attrs, 2))
    np.random.seed(args.seed)
    log = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(_Tee(log, sys.stderr)):
        if args.mechanism == "jam":
            jam = reference["jam"]
            public = dataset(args.public)
            mech = jam.JAM(args.epsilon, args.delta, prng=np.random.default_rng(args.seed), rounds=args.rounds,
                           size_limit=args.size_limit, optim_iters=args.iters)
            model, synth = mech.run(private, public, workload)
            rounds = parse_rounds(log.getvalue())
            rho_used = replay_budget(jam, mech, rounds)
        else:
            mech = reference["aim"].AIM(args.epsilon, args.delta, prng=np.random.default_rng(args.seed),
                                        rounds=args.rounds,
                           max_model_size=args.size_limit, max_iters=args.iters)
            model, synth = mech.run(private, [(c, 1.0) for c in workload])
            rounds = parse_aim(log.getvalue())
            rho_used = rounds[-1]["rho_used"] if rounds else None
        jax.block_until_ready(model._model if isinstance(model, FastModel) else model)
    wall = time.perf_counter() - t0
    inner = model._model if isinstance(model, FastModel) else model

    arrays = {}
    cliques = [tuple(c) for c in inner.potentials.cliques]
    for j, c in enumerate(cliques):
        f = inner.potentials[c]
        values = np.asarray(f.datavector(flatten=False), np.float64)
        own = list(f.domain.attributes)
        arrays[f"pot_{j}"] = np.transpose(values, [own.index(a) for a in c])
    arrays["records"] = np.stack([np.asarray(synth.data[a]) for a in attrs], axis=1).astype(np.int64)
    np.savez(args.arrays, **arrays)
    public_taken = [r["clique"] for r in rounds if r["source"] == "public"]
    return {
        "library": "mbi", "mechanism": args.mechanism, "epsilon": args.epsilon, "delta": args.delta,
        "seed": args.seed, "wall_s": wall, "rounds_nominal": args.rounds, "rounds_run": len(rounds),
        "public_taken": len(public_taken), "public_cliques": public_taken, "log": rounds,
        "rho": float(mech.rho), "rho_used": rho_used,
        "total": float(inner.total), "potential_cliques": [list(c) for c in cliques],
        "model_mb": float(_model_mb(mbi, domain, cliques)), "synthetic_rows": int(arrays["records"].shape[0]),
        "fit_s": stats["fit_s"], "fits": stats["fits"], "project_s": stats["project_s"],
        "projects": stats["projects"], "check_max_abs": stats["check_max_abs"] if stats["checks"] else None,
        "checks": stats["checks"], "matplotlib_stub": stubbed, "reference": exported, "versions": versions(),
        "backend": jax.default_backend(), "arrays": args.arrays,
        "pythonhashseed": os.environ.get("PYTHONHASHSEED"),
        "size_limit_mb": args.size_limit, "iters": args.iters,
    }


def _model_mb(mbi, domain, cliques) -> float:
    from mbi import junction_tree

    return junction_tree.hypothetical_model_size(domain, list(cliques))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.jam_reference", description=__doc__.splitlines()[0])
    ap.add_argument("--meta", required=True, help="meta.json written by bench.public_data (domain, private table)")
    ap.add_argument("--public", default=None, help="the public table (.npy of integer records), for JAM")
    ap.add_argument("--mechanism", choices=("jam", "aim"), default="jam")
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=30, help="JAM's rounds (its default 30)")
    ap.add_argument("--size-limit", type=float, default=80.0, help="model size limit in MB (JAM's default 80)")
    ap.add_argument("--iters", type=int, default=1000, help="mirror-descent iterations per fit (JAM's default 1000)")
    ap.add_argument("--check", type=int, default=1, help="candidates per model checked against mbi's own project")
    ap.add_argument("--source", default=MIRROR, help="git directory of the private-pgm repository")
    ap.add_argument("--commit", default="HEAD", help="its commit to export")
    ap.add_argument("--jam-dir", default=None, help="an exported copy instead (a folder holding mechanisms/)")
    ap.add_argument("--arrays", required=True, help="write the final potentials and synthetic records here (.npz)")
    ap.add_argument("--result", required=True, help="write the JSON row here")
    args = ap.parse_args(argv)
    if args.mechanism == "jam" and not args.public:
        ap.error("--public is required for JAM")
    row = run(args)
    with open(args.result, "w") as f:
        json.dump(row, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
