"""``pgmjax info`` and :func:`pgmjax.cli.info.device_info`: versions, backend, devices, memory, CUDA plugin."""

import json

import jax

from pgmjax import cli
from pgmjax.cli import info


def test_device_info_reports_versions_backend_and_devices():
    d = info.device_info()
    assert d["jax"] == jax.__version__ and d["pgmjax"]
    assert d["backend"] == jax.default_backend()
    assert len(d["devices"]) == len(jax.devices())
    for dev in d["devices"]:
        assert {"id", "kind", "platform", "memory"} <= dev.keys()
        assert dev["memory"] is None or all(isinstance(v, int) for v in dev["memory"].values())
    assert isinstance(d["cuda_plugin"], dict) and isinstance(d["cuda_plugin_loaded"], bool)
    if d["platform"] != "cpu":
        assert not any(k.startswith("xla_cpu_") for k in d["compiler_options"])
    json.dumps(d)  # --json prints it


class _Device:
    def __init__(self, stats):
        self.stats = stats

    def memory_stats(self):
        if isinstance(self.stats, Exception):
            raise self.stats
        return self.stats


def test_memory_is_none_or_the_keys_jax_reports():
    # XLA:CPU returns None, some devices lack the method or raise, a GPU fills the keys.
    assert info._memory(_Device(None)) is None
    assert info._memory(_Device({})) is None
    assert info._memory(_Device(NotImplementedError("no"))) is None
    assert info._memory(object()) is None
    assert info._memory(_Device({"bytes_in_use": 5})) == {"in_use": 5}
    gpu = {"bytes_limit": 80 * 2**30, "bytes_in_use": 2**20, "peak_bytes_in_use": 2**21, "num_allocs": 3}
    assert info._memory(_Device(gpu)) == {"limit": 80 * 2**30, "in_use": 2**20, "peak": 2**21}


def test_lines_name_each_device_and_the_plugin():
    d = {"pgmjax": "0.1.0", "jax": "0.11.0", "jaxlib": "0.11.0", "backend": "gpu", "platform": "gpu",
         "devices": [{"id": 0, "kind": "NVIDIA H100 80GB HBM3", "platform": "gpu", "memory": {"limit": 80 * 2**30}}],
         "cuda_plugin": {"jax-cuda12-plugin": "0.11.0"}, "cuda_plugin_loaded": True, "compiler_options": {}}
    text = "\n".join(info.format_info(d))
    assert "NVIDIA H100 80GB HBM3 (gpu), limit 80.00 GiB" in text
    assert "jax-cuda12-plugin 0.11.0; loaded" in text and "engine compiler options: none" in text


def test_the_command_prints_it(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "default backend:" in out and "device 0:" in out and "CUDA plugin:" in out
    assert cli.main(["info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["backend"] == jax.default_backend()
