"""Release fingerprints: hashes of what every mechanism releases and every fitting path returns for fixed keys,
to show that a refactor changes no public result (run at two commits, then ``--compare``).

Each fingerprint is a SHA-256 prefix of the exact bytes (float32, the default dtype) of a model's clique marginals,
and of a mechanism's synthetic records where it releases them:

* every mechanism of ``pgmjax.mechanisms.registry`` on one generated 5-attribute table (800 records, key 3,
  ``engine_iters=150``);
* ``pj.estimate`` for every method and loss on the dense and the size-class program (300 iterations), a warm start
  from it (100), a ``tol`` stop, and ``pj.estimate_batch`` of three members;
* ``pj.fit`` under ``jax.jit`` for every method, its L1 fit, and ``jax.grad`` through dual averaging;
* ``pj.estimate`` under constraints (a functional dependency, fitted without its target, and an allow-list), and
  with public marginals: the model, and the report's ``info`` (forbidden mass, eliminated targets, public cliques).

Usage::

    python -m bench.fingerprints --out /tmp/before.json            # at one commit (a git worktree)
    python -m bench.fingerprints --out /tmp/after.json             # at the other
    python -m bench.fingerprints --compare /tmp/before.json /tmp/after.json --out bench/results/engine/NAME
"""

from __future__ import annotations

import argparse
import hashlib
import json

import numpy as np

ATTRIBUTES = {"a": 3, "b": 4, "c": 2, "d": 5, "e": 3}
CLIQUES = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("a", "e")]


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a)).tobytes())
    return h.hexdigest()[:16]


def _model(model) -> str:
    return _digest(*[model.marginal(c) for c in model.cliques])


def _error(e: Exception) -> str:
    return f"error {type(e).__name__}: {str(e)[:200]}"


def fingerprints(quick: bool = False) -> dict:
    """Every fingerprint of the module docstring (``quick``: the mechanisms and mirror descent's fits only)."""
    import jax
    import pgmjax as pj
    from pgmjax.mechanisms import registry

    rng = np.random.default_rng(0)
    records = rng.integers(0, list(ATTRIBUTES.values()), (800, len(ATTRIBUTES)))
    records[:, 1] = (records[:, 0] + rng.integers(0, 2, 800)) % 4
    data = pj.Dataset(records, ATTRIBUTES)
    out = {}
    for name in sorted(registry.MECHANISMS):
        try:
            res = registry.run(name, data, 1.0, key=jax.random.key(3), engine_iters=150)
            parts = {"model": _model(res.model) if res.model is not None else None}
            if getattr(res, "synthetic", None) is not None:
                parts["synthetic"] = _digest(np.asarray(res.synthetic.df))
            out[f"mechanism {name}"] = parts
        except Exception as e:  # a refusal is a result too: it must not change either
            out[f"mechanism {name}"] = _error(e)
    domain = pj.Domain(ATTRIBUTES)
    ms = [pj.Measurement(c, data.marginal(c) + rng.normal(0, 5, data.marginal(c).shape), stddev=5.0) for c in CLIQUES]
    methods = ["mirror_descent"] if quick else ["mirror_descent", "dual_averaging", "lbfgs"]
    for method in methods:
        for loss in ("l2", "l1"):
            for program in ("dense", "size_class"):
                key = f"estimate {method} {loss} {program}"
                try:
                    fit = pj.estimate(domain, ms, method=method, loss=loss, iters=300, program=program, report=True)
                    m, r = fit
                    out[key] = [_model(m), r.history[-1]["iteration"], r.loss, r.step_size]
                    # from the Fit: the warm start continues from its report's step size, as it did from the model's
                    w, wr = pj.estimate(domain, ms, method=method, loss=loss, iters=100, program=program,
                                        warm_start=fit, report=True)
                    out[f"warm start {method} {loss} {program}"] = [_model(w), wr.history[-1]["iteration"]]
                except Exception as e:
                    out[key] = _error(e)
        m, r = pj.estimate(domain, ms, method=method, iters=2000, tol=1e-4, report=True)
        out[f"tol {method}"] = [_model(m), r.history[-1]["iteration"]]
        members = [pj.BatchedMeasurement(x.clique, np.stack([x.y + k for k in range(3)]), stddev=5.0) for x in ms]
        b, br = pj.estimate_batch(domain, members, method=method, iters=200, report=True)
        out[f"batch {method}"] = [_digest(*[b.marginal(c) for c in b.cliques]), _digest(br.loss)]
    # constraints (the dependency's target leaves the fit) and public marginals: the model and what the report says
    mapping = np.array([0, 1, 1, 0, 1])  # d determines c
    constraints = [pj.Constraint.determines("d", "c", mapping), pj.Constraint.allow(("a", "e"), [(0, 0), (1, 1), (2, 2),
                                                                                              (0, 1)])]
    public = pj.PublicData(pj.Dataset(records[:200], ATTRIBUTES), cliques=[("a", "b")])
    for key, options in (("constraints", {"constraints": constraints}), ("public", {"public": public}),
                         ("constraints and public", {"constraints": constraints, "public": public})):
        try:
            m, r = pj.estimate(domain, ms, iters=200, report=True, **options)
            out[f"estimate {key}"] = [_model(m), repr(sorted(r.info.items()))]
        except Exception as e:
            out[f"estimate {key}"] = _error(e)
    if not quick:
        for method in ("dual_averaging", "mirror_descent", "lbfgs"):
            def answer(y, method=method):
                return pj.fit(domain, [pj.Measurement(("a", "b"), y)] + ms[1:], iters=100, method=method).marginal(("a", "b"))
            out[f"fit {method}"] = _digest(jax.jit(answer)(ms[0].y))
        grad = jax.grad(lambda y: pj.fit(domain, [pj.Measurement(("a", "b"), y)] + ms[1:], iters=100,
                                          method="dual_averaging").marginal(("a",))[0])(ms[0].y)
        out["grad of fit dual_averaging"] = _digest(grad)
        out["fit l1"] = _digest(pj.fit(domain, ms, iters=120, loss="l1").marginal(("a", "b")))
    return out


def compare(before: dict, after: dict) -> str:
    """A Markdown table: each fingerprint, same or changed (with both values where changed)."""
    lines = ["| what | before | after | same |", "|---|---|---|---|"]
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        same = "yes" if a == b else "**no**"
        lines.append(f"| {key} | {'' if a == b else a} | {'' if a == b else b} | {same} |")
    n = sum(before.get(k) == after.get(k) for k in set(before) | set(after))
    return "\n".join(lines) + f"\n\n{n} of {len(set(before) | set(after))} fingerprints the same.\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="the fingerprints' JSON; with --compare, the .md/.json prefix")
    ap.add_argument("--quick", action="store_true", help="the mechanisms and mirror descent's fits only")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="two fingerprint files to compare")
    args = ap.parse_args(argv)
    if args.compare:
        before, after = (json.load(open(p)) for p in args.compare)
        with open(args.out + ".md", "w") as f:
            f.write(f"# Release fingerprints: {args.compare[0]} against {args.compare[1]}\n\n"
                    "Written by `python -m bench.fingerprints --compare` (its docstring says what each one hashes).\n\n")
            f.write(compare(before, after))
        with open(args.out + ".json", "w") as f:
            json.dump({"before": before, "after": after}, f, indent=1)
        print(compare(before, after))
        return
    found = fingerprints(args.quick)
    with open(args.out if args.out.endswith(".json") else args.out + ".json", "w") as f:
        json.dump(found, f, indent=1)
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
