"""Time each estimate call inside one TreeAIM run (iterations, program, cells)."""
import json, sys, time
import jax
import pgmjax as pj
import pgmjax.mechanisms.tree_adaptive as ta
from pgmjax.mechanisms.tree_adaptive import tree_aim

orig = ta.estimate
def timed(*a, **k):
    t0 = time.perf_counter(); out = orig(*a, **k); dt = time.perf_counter() - t0
    rep = out.report
    print(f"  fit: {dt:6.2f} s iters={rep.iterations} given={k.get('iters')} exp={k.get('expected_iters')} "
          f"info={ {k: v for k, v in rep.info.items() if isinstance(v, (str, int, float, bool))} } mb={ta.model_mb(out.model):.2f}", flush=True)
    return out
ta.estimate = timed
opts = json.loads(sys.argv[1]); name = opts.pop("data"); eps = float(opts.pop("eps")); seed = int(opts.pop("seed", 0))
if name.startswith(("generated", "wide")):
    from bench.tables import load_table
    data = load_table(name)
else:
    data = pj.datasets.load(name, "/work/shared/data")
t0 = time.perf_counter()
res = tree_aim(data, eps, 1e-9, key=jax.random.key(seed), **opts)
import itertools
from pgmjax.model.metrics import marginal_tvd
pairs = list(itertools.combinations(data.domain.attributes, 2))
print("synth TVD", round(marginal_tvd(data, res.synthetic, pairs), 4))
print("wall", round(time.perf_counter() - t0, 1), {k: round(v, 1) for k, v in res.info.seconds.items()}, res.info.budget.get("batches"), res.info.budget.get("picks"), [round(l["model_mb"],2) for l in res.info.log])
