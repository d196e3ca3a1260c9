"""Every noise addition and private selection in ``pgmjax`` goes through the privacy layer.

Read from the source with :mod:`ast`: outside :mod:`pgmjax.privacy`, a module may call a random sampler
(``jax.random.*`` other than key handling, ``numpy.random.*``, a NumPy ``Generator``'s methods) only where
it is listed in :data:`ALLOWED` with the reason the draw cannot touch private data: it samples from a
fitted model or re-noises its answers (post-processing), generates public example data, or is a
data-independent choice inside a mechanism (a strategy's starting point, a tie-break, the uniform first
round of DualQuery). Any other draw, in a new module or a new call, fails here and must be routed
through :class:`pgmjax.privacy.Accountant` (which checks it against the budget and records it) or added
to the list with its reason. The accountant's side (every mechanism's ledger matches what it spends) is
checked in ``tests/mechanisms/test_mechanism_interface.py`` and ``tests/privacy/test_privacy.py``.
"""

from __future__ import annotations

import ast
import pathlib

import pytest
from conftest import dotted

ROOT = pathlib.Path(__file__).resolve().parents[2] / "pgmjax"

#: ``jax.random`` functions that handle keys and draw nothing.
KEY_HANDLING = {"split", "key", "PRNGKey", "fold_in", "key_data", "wrap_key_data", "key_impl", "clone"}

#: module (relative to pgmjax/) -> samplers it may call, and why no private value reaches them.
ALLOWED: dict[str, tuple[set[str], str]] = {
    "bayes/errors.py": ({"laplace", "normal"}, "Monte Carlo of an error law from public weights and scales"),
    "cli/demo.py": ({"default_rng", "choice", "dirichlet", "integers", "permutation", "random"}, "generates the public demo table"),
    "datasets.py": ({"default_rng", "choice"}, "benchmark cliques drawn from the attribute names, seed 0"),
    "data/examples.py": ({"default_rng", "beta", "choice", "normal", "permutation", "random", "standard_normal", "uniform"},
                         "generates a public example table"),
    "history/cv.py": ({"permutation"}, "cross-validation folds over released noisy answers"),
    "history/gibbs.py": ({"categorical", "randint", "uniform"}, "Gibbs sampling from a fitted model"),
    "mechanisms/dual_query/front_end.py": ({"categorical", "uniform"},
                                           "round 1's uniform draws and tie-breaks read no data (later rounds: Accountant.exponential)"),
    "mechanisms/matrix_mechanism/optimize.py": ({"uniform"}, "a strategy's random starting point (the strategy never sees data)"),
    "mechanisms/matrix_mechanism/templates.py": ({"uniform"}, "a template's random starting point"),
    "mechanisms/query_learning/selection.py": ({"permutation"}, "a random order of candidate queries (structure only)"),
    "model/rounding.py": ({"random", "uniform"}, "tie-breaks and systematic picks when rounding a fitted model's counts into records"),
    "model/record_updating.py": ({"bits", "default_rng", "integers", "permutation", "random"},
                                 "synthetic records made to match a fitted approximate model's pseudo-marginals"),
    "model/sampling.py": ({"default_rng", "random", "uniform", "bits"}, "synthetic records from a fitted model"),
    "data/schema_columns.py": ({"bits"}, "decodes synthetic codes to values uniformly within their bins"),
    "mechanisms/query_learning/query_set.py": ({"bits"}, "random rectangle queries over the domain (structure only)"),
    "queries/linear.py": ({"default_rng"}, "power iteration's start vector, seed 0"),
    "queries/workload.py": ({"default_rng"}, "random workloads over the domain (public)"),
    "uncertainty/bootstrap.py": ({"laplace", "normal"}, "parametric bootstrap: re-noises the fitted model's answers"),
    "uncertainty/simulate.py": ({"default_rng"}, "coverage simulations on generated data"),
}


def samplers_called(source: str) -> set[str]:
    """The sampler names a module's source calls or imports: ``jax.random.<f>`` (not key handling),
    ``np.random.<f>`` / ``numpy.random.<f>``, ``default_rng``, and methods of a name bound to
    ``default_rng(...)``."""
    tree = ast.parse(source)
    generators = {"rng"}  # the name every module gives a Generator it is passed
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and dotted(node.value.func).endswith("default_rng"):
            generators |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            head, _, leaf = name.rpartition(".")
            if name.endswith("default_rng"):
                found.add("default_rng")
            elif head.endswith("random") and head.split(".")[0] in ("jax", "jr", "random", "np", "numpy"):
                if leaf not in KEY_HANDLING:
                    found.add(leaf)
            elif head in generators:
                found.add(leaf)
        if isinstance(node, ast.ImportFrom) and (node.module or "") in ("jax.random", "numpy.random"):
            found |= {a.name for a in node.names} - KEY_HANDLING
    return found


def _modules():
    return [p for p in sorted(ROOT.rglob("*.py")) if "privacy" not in p.relative_to(ROOT).parts]


def test_the_walk_sees_the_package():
    rel = {p.relative_to(ROOT).as_posix() for p in _modules()}
    assert {"estimation/driver.py", "mechanisms/spanning_tree.py", "model/sampling.py", "preprocessing/private_bins.py"} <= rel
    assert not any(r.startswith("privacy/") for r in rel)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_draw_outside_the_privacy_layer_unless_listed(path):
    rel = path.relative_to(ROOT).as_posix()
    allowed = ALLOWED.get(rel, (set(), ""))[0]
    extra = samplers_called(path.read_text(encoding="utf-8")) - allowed
    assert not extra, f"pgmjax/{rel} draws {sorted(extra)} outside the privacy layer: route it through the Accountant"


def test_the_allowed_list_has_no_stale_entries():
    """Each listed module exists and still calls every sampler it is allowed (the list stays exact)."""
    for rel, (names, reason) in ALLOWED.items():
        path = ROOT / rel
        assert path.exists(), rel
        assert reason
        assert names <= samplers_called(path.read_text(encoding="utf-8")), (rel, names - samplers_called(path.read_text()))


def test_the_check_sees_a_draw():
    src = (
        "import jax, numpy as np\n"
        "def leak(key, counts):\n"
        "    rng = np.random.default_rng(1)\n"
        "    k1, k2 = jax.random.split(key)\n"
        "    return counts + jax.random.laplace(k1, counts.shape) + rng.normal(size=3) + np.random.gumbel()\n"
    )
    assert samplers_called(src) == {"default_rng", "laplace", "normal", "gumbel"}
    assert samplers_called("from jax.random import normal, split\n") == {"normal"}
