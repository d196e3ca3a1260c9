"""The opt-in compilation cache (pgmjax.programs.enable_compilation_cache): JAX's persistent cache in a folder
pgmjax trusts, and nothing else read from it.

The folder holds compiled programs that a later process runs, so it must be the user's own and writable by
nobody else; a folder that is not (another owner, group or world writable, a symbolic link) is refused, one
that cannot be created or written leaves the process uncached, and neither ever fails an import or a fit.
Every fit runs in a fresh process (the cache is set when JAX compiles its first program)."""

import json
import os
import pickle
import stat
import subprocess
import sys
import warnings

import jax
import numpy as np
import pytest

from pgmjax import programs

# Two structures fitted in a fresh process; prints JSON with the losses, the first model's potentials, JAX's
# cache hits and the warnings seen. argv[1]: "env" (the folder through $PGMJAX_COMPILATION_CACHE, at import),
# "call" (enable_compilation_cache($CC_FOLDER, min_compile_seconds=0)), "unwritable" ("call", then every write
# to JAX's cache fails, as in a read-only folder), "jax" (JAX's own cache in $CC_FOLDER, without pgmjax's call)
# or "none".
FIT = r"""
import json, os, sys, warnings
warnings.simplefilter("always")
seen = warnings.catch_warnings(record=True)
caught = seen.__enter__()
import jax
import jax.monitoring
hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(event) if event == "/jax/compilation_cache/cache_hits" else None)
mode = sys.argv[1]
if mode == "jax":
    jax.config.update("jax_compilation_cache_dir", os.environ["CC_FOLDER"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
import numpy as np
import pgmjax as pj
if mode in ("call", "unwritable"):
    pj.programs.enable_compilation_cache(os.environ["CC_FOLDER"], min_compile_seconds=0)
if mode == "unwritable":
    from jax._src import lru_cache

    def refuse(self, key, value):
        raise PermissionError(13, "Permission denied", str(self.path / key))

    lru_cache.LRUCache.put = refuse
out = {"losses": {}, "theta": {}}
for name, sizes, cliques in [("s1", {"a": 3, "b": 4, "c": 5}, [("a", "b"), ("b", "c")]),
                             ("s2", {"x": 2, "y": 6, "z": 3, "w": 4}, [("x", "y"), ("y", "z"), ("z", "w")])]:
    dom = pj.Domain(sizes)
    rng = np.random.default_rng(7)
    ms = [pj.Measurement(c, rng.uniform(0, 40, tuple(sizes[a] for a in c)), stddev=2.0) for c in cliques]
    model, report = pj.estimate(dom, ms, iters=30, chunk=10, report=True)
    out["losses"][name] = float(report.loss)
    if name == "s1":
        out["theta"] = {k: np.asarray(v).tolist() for k, v in model.theta.items()}
out["hits"] = len(hits)
out["cache_dir"] = jax.config.jax_compilation_cache_dir
out["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
print(json.dumps(out))
"""

# Every variable that would turn a cache on in a child, whatever the caller's environment holds.
_CACHE_VARS = (programs.CACHE_ENV, "CC_FOLDER", "JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
               "JAX_ENABLE_COMPILATION_CACHE")


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _CACHE_VARS}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _start(mode: str, **extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", FIT, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(**extra))


def _result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _fit(mode: str, **extra) -> dict:
    return _result(_start(mode, **extra))


@pytest.fixture(scope="module")
def reference() -> dict:
    """The two fits with no cache at all."""
    return _fit("none")


def _same_fit(got: dict, reference: dict) -> None:
    assert got["losses"].keys() == reference["losses"].keys()
    for k in reference["losses"]:
        assert got["losses"][k] == pytest.approx(reference["losses"][k], rel=1e-6)


def _files(folder) -> list:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def jax_cache_config():
    """Restores JAX's cache settings after a test that enables the cache in this process (nothing is compiled
    in between, so JAX never opens the folder)."""
    names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs", "jax_enable_compilation_cache")
    before = {n: getattr(jax.config, n) for n in names}
    yield
    for n, v in before.items():
        jax.config.update(n, v)


def test_a_later_process_loads_its_programs_from_jax_cache(tmp_path, reference):
    """The feature still works: the first process writes the fits' programs, a later one reads them back (JAX's
    cache hits) and gets the same models bit for bit; nothing but JAX's entries is written."""
    first = _fit("call", CC_FOLDER=tmp_path)
    assert first["cache_dir"] == str(tmp_path) and first["hits"] == 0
    files = _files(tmp_path)
    assert any("_chunk" in f for f in files), files
    # JAX's entries only (its compiled programs, and on a GPU its autotuning results): no programs/ folder
    assert all(f.endswith("-cache") or f.startswith("xla_gpu_per_fusion_autotune_cache_dir") for f in files), files
    later = _fit("call", CC_FOLDER=tmp_path)
    assert later["hits"] >= 2, later  # at least each structure's chunk program
    assert later["losses"] == first["losses"] and later["theta"] == first["theta"]
    _same_fit(later, reference)
    for k in reference["theta"]:
        np.testing.assert_allclose(later["theta"][k], reference["theta"][k], rtol=1e-5, atol=1e-5)


class _Plant:
    """A pickle that writes ``marker`` when loaded: what an attacker would put in a shared cache folder."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('ran')",))


def test_planted_files_are_never_executed(tmp_path, reference):
    """A pickle planted where the removed program store looked (``<cache>/programs/<name>``) and as every file of
    the cache folder is never loaded: the later process compiles again and fits the same models."""
    probe, marker = tmp_path / "probe", tmp_path / "marker"
    pickle.loads(pickle.dumps(_Plant(probe)))
    assert probe.exists()  # the plant does run code when unpickled
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    first = _fit("env", PGMJAX_COMPILATION_CACHE=folder)
    payload = pickle.dumps(_Plant(marker))
    (folder / "programs").mkdir(exist_ok=True)
    for name in ("0" * 64, "f" * 64, "program"):
        (folder / "programs" / name).write_bytes(b"")
    planted = [p for p in folder.rglob("*") if p.is_file()]
    for p in planted:
        p.write_bytes(payload)
    # the three planted names and at least one of JAX's own entries (how many JAX writes depends on the
    # machine's compile times, as entries under its minimum compile time are not written)
    assert len(planted) >= 4 and any(p.name.endswith("-cache") for p in planted), _files(folder)
    later = _fit("env", PGMJAX_COMPILATION_CACHE=folder)
    assert not marker.exists(), "a planted file ran"
    assert later["losses"] == first["losses"] and later["theta"] == first["theta"]
    _same_fit(later, reference)


@pytest.mark.parametrize("how", ["mode 777", "group writable", "other owner", "symlink"])
def test_a_folder_others_can_write_is_refused(tmp_path, how, jax_cache_config):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    if how == "mode 777":
        folder.chmod(0o777)
        expected = "mode 0o777"
    elif how == "group writable":
        folder.chmod(0o770)
        expected = "mode 0o770"
    elif how == "other owner":
        if os.getuid() != 0:
            pytest.skip("giving a folder to another user needs root")
        os.chown(folder, 65534, 65534)
        expected = "uid 65534"
    else:
        target, folder = folder, tmp_path / "link"
        folder.symlink_to(target)
        expected = "symbolic link"
    before = jax.config.jax_compilation_cache_dir
    with pytest.raises(programs.UntrustedCacheFolder, match=expected) as err:
        programs.enable_compilation_cache(folder)
    message = str(err.value)
    assert str(folder) in message and "expected" in message and f"uid {os.getuid()}" in message
    assert isinstance(err.value, PermissionError)
    assert jax.config.jax_compilation_cache_dir == before  # nothing turned on


def test_an_untrusted_folder_from_the_environment_warns_and_fits_uncached(tmp_path, reference):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    got = _fit("env", PGMJAX_COMPILATION_CACHE=folder)
    refused = [w for w in got["warnings"] if w.startswith("UserWarning") and str(folder) in w]
    assert refused and "0o777" in refused[0], got["warnings"]
    assert got["cache_dir"] is None
    assert _files(folder) == []  # nothing written there, nothing read
    _same_fit(got, reference)


@pytest.mark.slow  # a long check: python -m pytest -m slow (tests/README.md)
def test_no_crash_after_a_cache_hit(tmp_path, reference):
    """With JAX's persistent cache on as well, the removed store serialised an executable JAX's cache had handed
    back, and every later process that loaded it died (JaxRuntimeError: NOT_FOUND: Function ... not found).
    Here: JAX's own cache fills the folder, then three processes in sequence with pgmjax's cache on the same
    folder, then three at once on a new folder and one after them: all finish, with the same losses (a process
    racing another's write may warn that an entry did not load, and compiles it instead)."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    results = [_fit("jax", CC_FOLDER=folder)]
    results += [_fit("env", PGMJAX_COMPILATION_CACHE=folder) for _ in range(3)]
    fresh = tmp_path / "fresh"
    for r in results:
        assert not any("Error" in w for w in r["warnings"]), r["warnings"]
    assert results[-1]["hits"] >= 2
    fresh = tmp_path / "fresh"  # min_compile_seconds=0: every program is written, so the three race to write
    results += [_result(p) for p in [_start("call", CC_FOLDER=fresh) for _ in range(3)]]
    results.append(_fit("call", CC_FOLDER=fresh))
    assert results[-1]["hits"] >= 2
    for r in results:
        assert r["losses"] == results[0]["losses"]
    _same_fit(results[0], reference)


def test_an_uncreatable_folder_from_the_environment_warns(tmp_path, reference):
    """``import pgmjax`` with $PGMJAX_COMPILATION_CACHE under a regular file: a warning, and the fit runs uncached."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    folder = blocker / "cache"
    got = _fit("env", PGMJAX_COMPILATION_CACHE=folder)
    assert any(w.startswith("UserWarning") and str(folder) in w for w in got["warnings"]), got["warnings"]
    assert got["cache_dir"] is None
    _same_fit(got, reference)


def test_an_uncreatable_or_read_only_folder_warns_when_called(tmp_path, jax_cache_config, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    before = jax.config.jax_compilation_cache_dir
    with pytest.warns(UserWarning, match="cannot be created"):
        assert programs.enable_compilation_cache(blocker / "cache") is None
    with pytest.warns(UserWarning, match="not a folder"):
        assert programs.enable_compilation_cache(blocker) is None
    folder = tmp_path / "read_only"
    folder.mkdir(mode=0o500)
    if os.getuid() == 0:  # root writes through a mode of 0o500: answer as access(2) does for any other owner
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, m: real(p, m) and not (m & os.W_OK and os.fspath(p) == str(folder)))
    with pytest.warns(UserWarning, match="read-only"):
        assert programs.enable_compilation_cache(folder) is None
    assert jax.config.jax_compilation_cache_dir == before


def test_a_read_only_folder_never_fails_a_fit(tmp_path, reference):
    """A folder of mode 0o500 named by $PGMJAX_COMPILATION_CACHE: the fit finishes with the right loss."""
    if os.getuid() == 0:
        pytest.skip("running as root, whose writes a folder's mode of 0o500 does not stop "
                    "(test_failing_writes_to_jax_cache_never_fail_a_fit simulates the failing writes)")
    folder = tmp_path / "read_only"
    folder.mkdir(mode=0o500)
    got = _fit("env", PGMJAX_COMPILATION_CACHE=folder)
    _same_fit(got, reference)
    assert any(str(folder) in w for w in got["warnings"]), got["warnings"]


def test_failing_writes_to_jax_cache_never_fail_a_fit(tmp_path, reference):
    """The cache turned on, then every write to it fails (a folder made read-only, a full disk): JAX warns and
    the fit finishes with the right loss."""
    got = _fit("unwritable", CC_FOLDER=tmp_path)
    assert got["cache_dir"] == str(tmp_path)
    assert any("Error writing persistent compilation cache" in w for w in got["warnings"]), got["warnings"]
    _same_fit(got, reference)


def test_the_folder_is_created_private(tmp_path):
    folder = programs.check_cache_folder(tmp_path / "a" / "cache")
    assert folder == str(tmp_path / "a" / "cache")
    st = os.lstat(folder)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077 == 0 and st.st_uid == os.getuid()
    assert programs.check_cache_folder(folder) == folder  # an existing private folder passes as it is


def test_the_cache_takes_a_folder_and_a_threshold(tmp_path, jax_cache_config):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert programs.enable_compilation_cache(tmp_path, min_compile_seconds=0.5) == str(tmp_path)
    assert jax.config.jax_compilation_cache_dir == str(tmp_path)
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.5
    with pytest.raises(TypeError, match="programs"):  # the former keyword is gone
        programs.enable_compilation_cache(tmp_path, programs=True)


PICKLED = """
import pickle, sys
import pgmjax as pj
from pgmjax.graph.oracle_plan import make_plan
plan = make_plan(pj.Domain({"name": 3, "other": 4}), [("name", "other")])
sys.stdout.buffer.write(pickle.dumps((plan.domain, plan.static)))
"""


def test_pickled_domain_and_plan_keep_their_hash_in_another_process():
    """String hashes are salted per process: a hash pickled with the object would make an equal object of
    this process a different dict and jit key. (Written for the removed program store; pickled models and
    plans still cross processes.)"""
    import pgmjax as pj
    from pgmjax.graph.oracle_plan import make_plan

    out = subprocess.run([sys.executable, "-c", PICKLED], capture_output=True, timeout=300, env=_env())
    assert out.returncode == 0, out.stderr[-3000:]
    domain, static = pickle.loads(out.stdout)
    plan = make_plan(pj.Domain({"name": 3, "other": 4}), [("name", "other")])
    assert domain == plan.domain and hash(domain) == hash(plan.domain)
    assert static == plan.static and hash(static) == hash(plan.static)
    assert {plan.domain: 1}[domain] == 1


def _needs_root():
    if os.getuid() != 0:
        pytest.skip("giving a folder to another user needs root")


@pytest.mark.parametrize("how", ["world-writable parent", "parent of another user", "symlinked parent",
                                 "another user's file inside", "world-writable file inside", "symlink inside"])
def test_a_folder_others_could_change_is_refused(tmp_path, how, jax_cache_config):
    """Issue 57: the folder's parents (as written and resolved) and its contents are checked, not the folder
    alone. Each case was accepted before: a parent others can write (no sticky bit) lets them rename the checked
    folder away and put their own in its place; a symbolic link on the way leads into another user's folder;
    a planted entry is code another user can change."""
    base = tmp_path / "base"
    base.mkdir(mode=0o755)
    folder = base / "cache"
    if how == "world-writable parent":
        base.chmod(0o777)
        expected, named = "lies under", str(base)
    elif how == "parent of another user":
        _needs_root()
        os.chown(base, 65534, 65534)
        expected, named = "uid 65534", str(base)
    elif how == "symlinked parent":
        _needs_root()
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o755)
        os.chown(theirs, 65534, 65534)
        (tmp_path / "mine").symlink_to(theirs)
        folder = tmp_path / "mine" / "cache"
        expected, named = "uid 65534", str(theirs)
    else:
        folder.mkdir(mode=0o700)
        entry = folder / "planted"
        if how == "symlink inside":
            entry.symlink_to(tmp_path)
            expected = "symbolic link"
        else:
            entry.write_bytes(b"not a program")
            entry.chmod(0o666 if how == "world-writable file inside" else 0o644)
            if how == "another user's file inside":
                _needs_root()
                os.chown(entry, 65534, 65534)
            expected = "uid 65534" if how == "another user's file inside" else "mode 0o666"
        named = str(entry)
    before = jax.config.jax_compilation_cache_dir
    with pytest.raises(programs.UntrustedCacheFolder, match=expected) as err:
        programs.enable_compilation_cache(folder)
    assert named in str(err.value) and "expected" in str(err.value)
    assert jax.config.jax_compilation_cache_dir == before  # nothing turned on


def test_a_sticky_shared_parent_is_accepted(tmp_path, jax_cache_config):
    """A sticky world-writable parent (as /tmp) is fine: nobody else can rename or delete the user's folder in
    it. The user's own files inside (JAX's entries, mode 0o644) are fine too."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    folder = shared / "cache"
    folder.mkdir(mode=0o700)
    (folder / "entry").write_bytes(b"")
    (folder / "entry").chmod(0o644)
    assert programs.check_cache_folder(folder) == str(folder)
