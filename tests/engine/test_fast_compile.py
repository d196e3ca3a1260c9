"""pgmjax.programs.fast_compile: XLA:CPU's loop emitters for a process, opted in before JAX starts.

Each case runs in a fresh interpreter: XLA reads its flags once, when JAX starts its backends, and this test
process's backends run with the default emitters.
"""

import json
import os
import subprocess
import sys

import pytest

from pgmjax import programs

# A small irregular fit; prints the mode, the loss and the marginal of one clique as JSON.
FIT = """
import json, os, sys
import numpy as np
import jax
import pgmjax as pj
from pgmjax import programs
{setup}
rng = np.random.default_rng(0)
sizes = {{"a": 7, "b": 3, "c": 11, "d": 2, "e": 5}}
data = pj.Dataset(np.stack([rng.integers(0, s, 2000) for s in sizes.values()], axis=1), pj.Domain(sizes))
ms = pj.noisy_marginals(data, [("a", "b", "c"), ("c", "d"), ("d", "e"), ("a", "e")], stddev=3.0, key=jax.random.key(1))
model, report = pj.estimate(data.domain, ms, iters=200, report=True)
print(json.dumps({{"enabled": programs.fast_compile_enabled(), "flags": os.environ.get("XLA_FLAGS", ""),
                  "loss": float(report.loss), "ab": np.asarray(model.marginal(("a", "b")), float).tolist()}}))
"""


def _child(code: str, env: dict | None = None) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", programs.FAST_COMPILE_ENV)}
    proc = subprocess.run([sys.executable, "-c", code], env={**base, **(env or {})}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def default_fit():
    return _child(FIT.format(setup=""))


def test_fast_compile_fits_the_same_model(default_fit):
    fast = _child(FIT.format(setup="assert programs.fast_compile()"))
    assert not default_fit["enabled"] and fast["enabled"]
    assert programs.FAST_COMPILE_FLAG in fast["flags"]
    assert abs(fast["loss"] - default_fit["loss"]) <= 1e-4 * abs(default_fit["loss"])
    ab, ab0 = fast["ab"], default_fit["ab"]
    total = sum(map(sum, ab0))
    assert sum(abs(x - y) for r, r0 in zip(ab, ab0) for x, y in zip(r, r0)) / total < 1e-4


def test_the_environment_variable_turns_it_on_at_import(default_fit):
    fast = _child(FIT.format(setup=""), {programs.FAST_COMPILE_ENV: "1"})
    assert fast["enabled"] and programs.FAST_COMPILE_FLAG in fast["flags"]
    assert abs(fast["loss"] - default_fit["loss"]) <= 1e-4 * abs(default_fit["loss"])


def test_xla_compiles_with_the_flag(tmp_path):
    # XLA's own record of a program's options (its dump) says the loop emitters were asked for.
    code = (
        "import pgmjax, jax, jax.numpy as jnp\n"
        "assert pgmjax.programs.fast_compile()\n"
        "import os\n"
        f"os.environ['XLA_FLAGS'] += ' --xla_dump_to={tmp_path}'\n"
        "print(jax.jit(lambda x: x + 1)(jnp.ones(3)).sum())\n"
        "print('{}')\n"
    )
    _child(code)
    options = [f for f in os.listdir(tmp_path) if f.endswith(".debug_options")]
    assert options
    assert all("xla_cpu_use_fusion_emitters: false" in (tmp_path / f).read_text() for f in options)


def test_too_late_raises_and_a_users_own_choice_is_kept():
    late = _child(
        "import json, jax, pgmjax\njax.devices()\n"  # the child's backends start here, without the flag
        "try:\n    pgmjax.programs.fast_compile()\n    raised = ''\nexcept RuntimeError as e:\n    raised = str(e)\n"
        "print(json.dumps({'raised': raised, 'lenient': pgmjax.programs.fast_compile(strict=False)}))"
    )
    assert "before JAX's first computation" in late["raised"] and late["lenient"] is False
    kept = _child(
        "import os, json, pgmjax\nprint(json.dumps({'r': pgmjax.programs.fast_compile(), 'f': os.environ['XLA_FLAGS']}))",
        {"XLA_FLAGS": "--xla_cpu_use_fusion_emitters=true"},
    )
    assert kept == {"r": False, "f": "--xla_cpu_use_fusion_emitters=true"}


def test_the_command_line_compiles_with_it_unless_told_not_to():
    code = ("import os, sys, json\nfrom pgmjax.cli import console_main\nsys.argv = ['pgmjax', 'mechanisms']\n"
            "import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()):\n    code = console_main()\n"
            "print(json.dumps({'code': code, 'flags': os.environ.get('XLA_FLAGS', '')}))")
    on = _child(code)
    assert on["code"] == 0 and programs.FAST_COMPILE_FLAG in on["flags"]
    off = _child(code, {programs.FAST_COMPILE_ENV: "0"})
    assert off["code"] == 0 and off["flags"] == ""
