"""Multi-process sweeps: environment parsing, the local launcher, and 2 processes == 1 process, bit for bit.

The multi-process runs are real: ``grpojax launch`` starts two local processes (one CPU device each) that
meet through JAX's runtime on 127.0.0.1 and exchange results with JAX's CPU collectives. Every subprocess is
bounded twice: by the launcher's own ``timeout`` (which stops the processes it started) and by the test's.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time

import jax
import numpy as np
import pytest

from _procs import ENV_NAMES, GRPOJAX, REPO
from _procs import clean_env as _clean_env
from _procs import run_bounded as _run
from grpojax._distributed import ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID, distributed_env
from grpojax.cli._launch import launch
from grpojax.sweep import initialize_distributed, make_grid, run_sweep

# ---------------------------------------------------------------- environment


def test_distributed_env_reads_all_three_or_none():
    assert distributed_env({}) is None
    ok = {ENV_COORDINATOR: "10.0.0.1:12355", ENV_NUM_PROCESSES: "4", ENV_PROCESS_ID: "3"}
    assert distributed_env(ok) == ("10.0.0.1:12355", 4, 3)
    with pytest.raises(ValueError, match=f"{ENV_PROCESS_ID}.*not"):
        distributed_env({ENV_COORDINATOR: "h:1", ENV_NUM_PROCESSES: "2"})
    for name, bad, expected in [(ENV_COORDINATOR, "10.0.0.1", "host:port"), (ENV_COORDINATOR, "h:99999", "host:port"),
                                (ENV_NUM_PROCESSES, "two", "integer"), (ENV_NUM_PROCESSES, "0", ">= 1"),
                                (ENV_PROCESS_ID, "4", r"\[0, 3\]"), (ENV_PROCESS_ID, "-1", r"\[0, 3\]")]:
        with pytest.raises(ValueError, match=f"{name}.*{expected}"):
            distributed_env(dict(ok, **{name: bad}))


def test_a_started_jax_or_a_missing_runtime_is_refused(monkeypatch):
    jax.devices()  # this test process has used JAX: the runtime can no longer start
    monkeypatch.setenv(ENV_COORDINATOR, "127.0.0.1:1")
    monkeypatch.setenv(ENV_NUM_PROCESSES, "2")
    monkeypatch.setenv(ENV_PROCESS_ID, "0")
    with pytest.raises(ValueError, match="before any JAX computation"):
        initialize_distributed("auto")
    assert initialize_distributed("off") == 1
    with pytest.raises(ValueError, match="distributed mode"):
        initialize_distributed("yes")
    # without the runtime every process would run the whole sweep and write it: refused
    with pytest.raises(ValueError, match=f"{ENV_NUM_PROCESSES}=2"):
        run_sweep(make_grid(eta=0.1, group_size=8), 16, key=jax.random.key(0))


# ---------------------------------------------------------------- launcher


def test_launch_gives_each_process_its_id_and_one_address(tmp_path):
    script = f"import os, json; json.dump({{k: os.environ[k] for k in {ENV_NAMES!r}}}, " \
             f"open(os.path.join({str(tmp_path)!r}, os.environ[{ENV_PROCESS_ID!r}] + '.json'), 'w'))"
    assert launch([sys.executable, "-c", script], 3, timeout=60) == 0
    seen = [json.loads((tmp_path / f"{i}.json").read_text()) for i in range(3)]
    assert [s[ENV_PROCESS_ID] for s in seen] == ["0", "1", "2"]
    assert {s[ENV_NUM_PROCESSES] for s in seen} == {"3"}
    addrs = {s[ENV_COORDINATOR] for s in seen}
    assert len(addrs) == 1 and addrs.pop().startswith("127.0.0.1:")


def test_launch_forwards_a_failure_and_stops_the_others(tmp_path):
    # process 1 fails at once with status 3; process 0 would sleep for a minute
    script = textwrap.dedent(f"""
        import os, sys, time
        pid = os.environ[{ENV_PROCESS_ID!r}]
        open(os.path.join({str(tmp_path)!r}, pid), "w").write(str(os.getpid()))
        if pid == "1":
            time.sleep(0.5)
            sys.exit(3)
        time.sleep(60)
        """)
    t0 = time.monotonic()
    assert launch([sys.executable, "-c", script], 2, timeout=50) == 3
    assert time.monotonic() - t0 < 20
    sleeper = int((tmp_path / "0").read_text())
    with pytest.raises(ProcessLookupError):  # stopped and reaped
        os.kill(sleeper, 0)
    # a hung process is stopped at the timeout (status 124)
    t0 = time.monotonic()
    assert launch([sys.executable, "-c", "import time; time.sleep(60)"], 2, timeout=1.0) == 124
    assert time.monotonic() - t0 < 15


def test_distributed_on_outside_a_cluster_says_what_is_missing(tmp_path):
    script = "from grpojax.sweep import initialize_distributed; initialize_distributed('on')"
    env = {k: v for k, v in _clean_env().items() if not k.startswith(("SLURM_", "OMPI_", "TPU_"))}
    res = _run([sys.executable, "-c", script], 60, env=env, cwd=REPO)
    assert res.returncode != 0 and "no multi-process job found" in res.stdout and ENV_COORDINATOR in res.stdout


def test_launch_cli_rejects_bad_values(capsys):
    from grpojax.cli import main

    assert main(["launch", "-n", "0", "--", "true"]) == 2
    assert "--num-processes must be >= 1, got 0" in capsys.readouterr().err
    assert main(["launch", "-n", "2"]) == 2
    assert "no command given" in capsys.readouterr().err
    assert main(["launch", "-n", "1", "--", "false"]) == 1


# ---------------------------------------------------------------- 2 processes == 1 process

_GLUE = textwrap.dedent("""
    import json, sys
    import numpy as np
    from grpojax.sweep import initialize_distributed, is_primary
    initialize_distributed("auto")
    import jax
    jax.config.update("jax_enable_x64", True)
    from jax.sharding import NamedSharding, PartitionSpec
    from grpojax.sweep._engine import _mesh, _place, _to_host
    host = np.arange(10.0) ** 1.5
    x = _place(host, NamedSharding(_mesh(), PartitionSpec("configs")))
    y = _to_host(jax.jit(lambda a: a * a + 1.0)(x))
    own = [np.asarray(s.data).tolist() for s in x.addressable_shards]
    json.dump(dict(primary=is_primary(), processes=jax.process_count(), addressable=x.is_fully_addressable,
                   own=own, gathered=y.tolist()), open(f"{sys.argv[1]}-{jax.process_index()}.json", "w"))
    """)


def test_two_processes_place_own_rows_and_gather_all(tmp_path):
    """The engine's glue across 2 real processes: each holds only its half of a chunk, each gets all results."""
    script = tmp_path / "glue.py"
    script.write_text(_GLUE)
    two = _run([*GRPOJAX, "launch", "-n", "2", "--timeout", "100", "--", sys.executable, str(script),
                str(tmp_path / "g")], 120, env=_clean_env(), cwd=REPO)
    assert two.returncode == 0, two.stdout[-3000:]
    host = np.arange(10.0) ** 1.5
    got = [json.loads((tmp_path / f"g-{pid}.json").read_text()) for pid in (0, 1)]
    assert [g["primary"] for g in got] == [True, False]
    assert all(g["processes"] == 2 and not g["addressable"] for g in got)
    halves = sorted((g["own"][0] for g in got), key=lambda h: h[0])
    np.testing.assert_array_equal(np.concatenate(halves), host)  # the two processes hold disjoint halves
    assert all(len(g["own"]) == 1 and len(g["own"][0]) == 5 for g in got)
    for g in got:
        np.testing.assert_array_equal(g["gathered"], host * host + 1.0)

_SWEEP = textwrap.dedent("""
    import sys
    import numpy as np
    from grpojax.sweep import initialize_distributed, make_grid, run_sweep
    initialize_distributed("auto")            # before any JAX computation
    import jax
    jax.config.update("jax_enable_x64", True)
    g = make_grid(eta=[0.05, 0.2, 0.4], k_ref=[1, 3], mu=0.5, group_size=[8, 30], beta=0.5, p_init=0.4)
    r = run_sweep(g, 48, key=jax.random.key(7), chunk_size=5, return_traces=True)
    arrays = {"col_" + k: v for k, v in r.columns.items()}
    np.savez(f"{sys.argv[1]}-{jax.process_index()}.npz", traces=r.traces, devices=jax.device_count(),
             processes=jax.process_count(), local=jax.local_device_count(), **arrays)
    """)


@pytest.mark.slow
def test_two_processes_equal_one_process_bit_for_bit(tmp_path):
    """A sweep split over 2 processes × 1 CPU device gives every result array of the 1-process sweep.

    About 30 s on 2 CPU cores (three compilations of the sampled sweep), hence ``slow``."""
    script = tmp_path / "sweep.py"
    script.write_text(_SWEEP)
    one = _run([sys.executable, str(script), str(tmp_path / "one")], 300, env=_clean_env(), cwd=REPO)
    assert one.returncode == 0, one.stdout[-3000:]
    two = _run([*GRPOJAX, "launch", "-n", "2", "--timeout", "280", "--", sys.executable, str(script),
                str(tmp_path / "two")], 300, env=_clean_env(), cwd=REPO)
    assert two.returncode == 0, two.stdout[-3000:]
    ref = np.load(tmp_path / "one-0.npz")
    assert int(ref["processes"]) == 1 and int(ref["devices"]) == 1
    for pid in (0, 1):  # every process holds the whole result
        got = np.load(tmp_path / f"two-{pid}.npz")
        assert int(got["processes"]) == 2 and int(got["devices"]) == 2 and int(got["local"]) == 1
        assert sorted(got.files) == sorted(ref.files)
        cols = [f for f in ref.files if f.startswith("col_")]
        assert {"col_regime", "col_late_mean", "col_growth_rate", "col_eta"} <= set(cols)
        for name in ["traces", *cols]:
            assert got[name].dtype == ref[name].dtype, name
            np.testing.assert_array_equal(got[name], ref[name], err_msg=name)
    # the sweep is not trivially constant: the rows end in different places
    assert len(np.unique(ref["traces"][:, -1])) > len(ref["traces"]) // 2


@pytest.mark.slow
def test_cli_sweep_two_processes_writes_once_and_equals_one(tmp_path):
    """``grpojax launch -n 2 -- grpojax sweep`` writes one sweep.json whose rows equal the 1-process run."""
    args = ["sweep", "--preset", "group-size", "--size", "2", "--steps", "24", "--chunk-size", "3"]
    one = _run([*GRPOJAX, *args, "--out", str(tmp_path / "one")], 300, env=_clean_env(), cwd=REPO)
    assert one.returncode == 0, one.stdout[-3000:]
    two = _run([*GRPOJAX, "launch", "-n", "2", "--timeout", "280", "--", "grpojax", *args, "--out",
                str(tmp_path / "two")], 300, env=_clean_env(), cwd=REPO)
    assert two.returncode == 0, two.stdout[-3000:]
    assert two.stdout.count("configurations in") == 1  # process 0 alone reports and writes
    a = json.loads((tmp_path / "one" / "sweep.json").read_text())
    b = json.loads((tmp_path / "two" / "sweep.json").read_text())
    assert b["meta"]["processes"] == 2 and b["meta"]["devices"] == 2
    assert a["rows"] == b["rows"]
    assert (tmp_path / "two" / "phase_diagram.png").is_file()
