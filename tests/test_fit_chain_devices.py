"""NUTS chains split between host devices: the same draws as on one device, and the command line's device choice."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from grpojax import _host_devices

# A child process with two host CPU devices samples a tiny model's chains with run_chains_split on one and on two
# devices and prints whether every output array is bit-identical (the split must not change a single draw).
_CHILD = textwrap.dedent("""
    import json
    import os
    import pathlib
    import sys
    import jax
    jax.config.update("jax_num_cpu_devices", 2)
    import jax.numpy as jnp
    import numpy as np
    import numpyro
    import numpyro.distributions as dist
    from grpojax._jax_cache import enable_compilation_cache
    from grpojax.fit._batched_nuts import chain_devices, run_chains_split

    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 3.0))
        tau = numpyro.sample("tau", dist.HalfNormal(1.0))
        numpyro.sample("y", dist.Normal(mu, tau), obs=y)

    y = jnp.asarray(np.random.default_rng(0).normal(0.5, 0.7, (1, 12)), jnp.float32)
    init = {"mu": jnp.zeros((1, 4)), "tau": jnp.zeros((1, 4))}
    keys = jax.random.split(jax.random.key(3), 4)[None]
    kw = dict(model=model, post=None, num_warmup=30, num_samples=20)
    with jax.numpy_dtype_promotion("standard"):
        one = run_chains_split(init, (y,), keys, devices=1, **kw)
        two = run_chains_split(init, (y,), keys, devices=2, **kw)
        os.environ["GRPOJAX_JAX_CACHE"] = sys.argv[1]
        enable_compilation_cache()  # from here on the traced program is exported to, then read from, the cache
        exported = run_chains_split(init, (y,), keys, devices=2, **kw)
        files = sorted(p.name for p in pathlib.Path(sys.argv[1], "exported").glob("*.bin"))
        read_back = run_chains_split(init, (y,), keys, devices=2, **kw)
    same = lambda a, b: all(np.array_equal(x, z) for x, z in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))
    print(json.dumps({"devices": jax.local_device_count(), "chain_devices": [chain_devices(n) for n in (1, 2, 3, 4)],
                      "identical": [same(one, two), same(one, exported), same(one, read_back)], "exported": len(files),
                      "shape": list(np.asarray(two[0]["mu"]).shape), "moved": bool(np.ptp(np.asarray(two[0]["mu"])) > 0)}))
""")


@pytest.mark.slow
def test_two_devices_give_the_draws_of_one(tmp_path):
    """Split between two devices, traced or read back from the exported program: the draws of one device."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES", "GRPOJAX_JAX_CACHE")}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "cache")], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["devices"] == 2
    assert res["chain_devices"] == [1, 2, 1, 2]  # the largest divisor of the chains within the devices
    assert res["shape"] == [1, 4, 20] and res["moved"]
    assert res["identical"] == [True, True, True]
    assert res["exported"] == (1 if importlib.util.find_spec("flatbuffers") else 0)


def test_host_cores_leave_the_users_choice(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=3")
    assert _host_devices.use_host_cores(4) is None
    monkeypatch.delenv("XLA_FLAGS")
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "1")
    assert _host_devices.use_host_cores(4) is None


def test_host_cores_one_chain_or_one_core_asks_nothing(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.delenv("JAX_NUM_CPU_DEVICES", raising=False)
    assert _host_devices.use_host_cores(1) is None
    monkeypatch.setattr(_host_devices, "usable_cores", lambda: 1)
    assert _host_devices.use_host_cores(4) is None


def test_host_cores_after_the_backend_started_changes_nothing(monkeypatch):
    import jax

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.delenv("JAX_NUM_CPU_DEVICES", raising=False)
    monkeypatch.setattr(_host_devices, "usable_cores", lambda: 2)
    n = jax.local_device_count()  # starts the backend
    assert _host_devices.use_host_cores(2) in (None, 2)  # 2 only where the backend already has 2 (the same value)
    assert jax.local_device_count() == n


def test_a_model_with_a_host_callback_is_sampled_not_exported(tmp_path, monkeypatch):
    """jax.export cannot serialise host callbacks (a runtime check such as ``eqx.error_if`` can lower to one):
    with the compilation cache on, such a model is traced as usual, draws as without the cache, and nothing is
    written beside the cache."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import numpyro
    import numpyro.distributions as dist

    from grpojax import _jax_cache
    from grpojax.fit._batched_nuts import run_chains, run_chains_split

    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 3.0))
        jax.debug.callback(lambda m: None, mu)  # a host callback in the traced program
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    y = jnp.asarray(np.random.default_rng(0).normal(0.5, 1.0, (1, 8)), jnp.float32)
    init, keys = {"mu": jnp.zeros((1, 2))}, jax.random.split(jax.random.key(1), 2)[None]
    kw = dict(model=model, post=None, num_warmup=10, num_samples=10)
    monkeypatch.setattr(_jax_cache, "_ENABLED", [str(tmp_path)])
    with jax.numpy_dtype_promotion("standard"):
        got = run_chains_split(init, (y,), keys, devices=1, **kw)
        want = run_chains(init, (y,), keys, **kw)
    assert all(np.array_equal(np.asarray(a), np.asarray(b))
               for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)))
    assert not list(tmp_path.rglob("*.bin"))


def test_the_exported_programs_kept_are_the_most_recently_used(tmp_path):
    """The cache keeps the ``keep`` most recently written or read programs and removes the others; files that
    are not exported programs are left alone."""
    import os  # noqa: PLC0415

    from grpojax.fit._batched_nuts import _prune_exported  # noqa: PLC0415

    for i in range(10):
        f = tmp_path / f"run_chains-{i:02d}.bin"
        f.write_bytes(b"x")
        os.utime(f, (1_000_000 + i, 1_000_000 + i))
    os.utime(tmp_path / "run_chains-01.bin", (2_000_000, 2_000_000))  # read recently
    (tmp_path / "other.bin").write_bytes(b"y")
    _prune_exported(tmp_path, keep=4)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["other.bin", "run_chains-01.bin", "run_chains-07.bin", "run_chains-08.bin", "run_chains-09.bin"]
    _prune_exported(tmp_path, keep=64)  # under the limit: nothing removed
    assert sorted(p.name for p in tmp_path.iterdir()) == left
