"""A GRPO step on two forced host devices (FSDP params, data-parallel batch) equals one device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    sys.path.insert(0, "tests")
    from test_grpo_trainer import tiny_config
    from grpojax.grpo import GRPOTrainer
    from grpojax.grpo._step import RolloutBatch
    assert jax.device_count() == 2, jax.devices()
    cfg = tiny_config("warmstart.steps=0", "grpo.k_ref=2", "grpo.beta=0.1", "grpo.advantage=rloo")
    one = GRPOTrainer(cfg, sys.argv[1] + "/one", devices=jax.devices()[:1])
    two = GRPOTrainer(cfg, sys.argv[1] + "/two", devices=jax.devices())
    one.rollout(0)
    # a batch with mixed advantages (an untrained model scores 0 everywhere)
    S = one.batch.adv.shape[0]
    adv = jnp.asarray(np.linspace(-1.0, 1.0, S), jnp.float32)
    host = jax.device_get(one.batch._replace(adv=adv))
    one.batch = RolloutBatch(*[one._put(x) for x in host])
    two.batch = RolloutBatch(*[two._put(x) for x in host])
    sharded = sorted({str(x.sharding.spec) for x in jax.tree.leaves(two.params)})
    out = {"sharded_specs": sharded, "batch_spec": str(two.batch.completion.sharding.spec), "steps": []}
    for fresh in (True, False):
        rec = []
        for tr in (one, two):
            tr.params, tr.opt_state, m = tr.update(tr.params, tr.opt_state, tr.rest, tr.batch, jnp.asarray(fresh))
            rec.append({k: float(v) for k, v in m.terms._asdict().items()} | {"grad_norm": float(m.grad_norm)})
        diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in
                   zip(jax.tree.leaves(one.params), jax.tree.leaves(jax.device_get(two.params))))
        scale = max(float(jnp.max(jnp.abs(a))) for a in jax.tree.leaves(one.params))
        out["steps"].append({"one": rec[0], "two": rec[1], "param_max_abs_diff": diff, "param_scale": scale})
    print("RESULT" + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def two_device_result(tmp_path_factory):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path_factory.mktemp("mesh"))], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


def test_two_devices_equal_one_device(two_device_result):
    res = two_device_result
    assert any("data" in s for s in res["sharded_specs"]), res["sharded_specs"]  # FSDP actually on
    assert "data" in res["batch_spec"]
    for st in res["steps"]:
        for k, v in st["one"].items():
            assert st["two"][k] == pytest.approx(v, rel=2e-5, abs=1e-6), k
        assert st["param_max_abs_diff"] <= 1e-5 * max(st["param_scale"], 1.0)
    # the second (lagged) step moved the policy: its ratio is no longer 1
    assert res["steps"][0]["one"]["is_ratio_max"] == 1.0
    assert res["steps"][1]["one"]["is_ratio_max"] != 1.0
