"""Fresh interpreters for the benchmarks: a script's child runs as ``python -m bench.<module>`` from the
repository root, so every measurement that needs a clean process (compile times, peak memory, an mbi half in
its own interpreter) starts the same way, and no script has to change the import path."""

from __future__ import annotations

import json
import os
import sys

from bench import problems
from bench.schema import ROOT


def alternating(module: str, names, rounds: int, arms, child_args, arm_key: str = "arm", drop_env=("XLA_FLAGS",)):
    """Rows of child results, the arms of a comparison alternating so drift of a shared machine hits all alike.

    For each problem (saved once, :func:`saved`) and each of ``rounds`` rounds, every arm runs once in a fresh
    interpreter (:func:`child_result`: ``python -m <module> --child ...``) with the parent's environment less
    ``drop_env``; a child that fails is reported and skipped. ``child_args(path, arm, round, folder)`` gives a
    child's arguments (``folder``: a scratch folder that lives for the whole comparison).

    Yields:
        ``{"problem": name, arm_key: arm, "round": round, **result}`` for each child that succeeded.
    """
    import tempfile

    env = {k: v for k, v in os.environ.items() if k not in drop_env}
    with tempfile.TemporaryDirectory() as folder:
        for name, path in problems.saved(names, folder):
            for rnd in range(rounds):
                for arm in arms:
                    result = child_result(module, child_args(path, arm, rnd, folder), env, f"{name} {arm}")
                    if result is not None:
                        yield {"problem": name, arm_key: arm, "round": rnd, **result}


def child_command(module: str, *args, python: str | None = None) -> list[str]:
    """The command that runs a bench module in a fresh interpreter: ``python -m <module> *args``, to be run
    with the repository root as working directory (:data:`ROOT`), so ``bench`` imports as a package."""
    return [python or sys.executable, "-m", module, *map(str, args)]


def child_result(module: str, args: list[str], env: dict, label: str, timeout: float | None = None) -> dict | None:
    """Run ``python -m <module> --child *args RESULT`` in a fresh interpreter with ``env`` (from the repository
    root) and return the JSON it wrote to RESULT (its last argument); None, with its error printed under
    ``label``, when it failed or ran past ``timeout`` seconds (then killed)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "result.json")
        return json_child(child_command(module, "--child", *args, result), result, env, label, timeout)


def json_child(cmd: list[str], result: str, env: dict, label: str, timeout: float | None = None):
    """Run ``cmd`` (from the repository root, with ``env``) and return the JSON it wrote to ``result``; None, with its
    error printed to stderr under ``label``, when it failed or ran past ``timeout`` seconds (then killed)."""
    import subprocess

    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        print(f"[{label}] killed after {timeout:.0f} s", file=sys.stderr, flush=True)
        return None
    if proc.returncode:
        print(f"[{label}] failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}", file=sys.stderr, flush=True)
        return None
    with open(result) as f:
        return json.load(f)


class ChildFailed(RuntimeError):
    """A child process that exited non-zero or ran past its timeout (its stderr's tail already printed)."""


def last_json(text: str):
    """The JSON value on the last line of a child's output."""
    return json.loads(text.strip().splitlines()[-1])


def json_line(cmd: list[str], label: str, env: dict | None = None, timeout: float | None = None,
              tail: int | None = 3000, capture_stderr: bool = True):
    """Run ``cmd`` from the repository root (with ``env``, default the parent's) and return the JSON value on the
    last line of its stdout. When it exits non-zero, the last ``tail`` characters of its stderr (None: all) are
    printed and :class:`ChildFailed` is raised under ``label``; so too when it runs past ``timeout`` seconds (then
    killed). ``capture_stderr=False``: the child's stderr goes straight to the parent's (its progress shows live)."""
    import subprocess

    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE if capture_stderr else None,
                              text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        raise ChildFailed(f"[{label}] killed after {timeout:.0f} s") from None
    if proc.returncode:
        if proc.stderr:
            sys.stderr.write(proc.stderr[-tail:] if tail else proc.stderr)
            sys.stderr.flush()
        raise ChildFailed(f"[{label}] failed (exit {proc.returncode})")
    return last_json(proc.stdout)
