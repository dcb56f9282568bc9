"""`grpojax diagnose FOLDER` with several runs diagnoses them in worker processes: the same reports, in
the same order, as one process."""

from __future__ import annotations

import json

import numpy as np

from grpojax.cli import main


def _write(path, n, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1)
    m = 0.1 + 0.5 * (1 - np.exp(-t / (n / 4)))
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"step": int(t[i]), "reward_mean": float(rng.binomial(64, m[i]) / 64),
                                 "entropy": float(0.5 * np.exp(-t[i] / n)),
                                 "grad_norm": float(0.3 * np.exp(0.1 * rng.standard_normal()))}) + "\n")


def test_pool_gives_the_reports_of_one_process_in_order(tmp_path, monkeypatch, capsys):
    import grpojax.cli._diagnose as cli_diag
    from grpojax.cli._common import console

    # pytest-xdist workers export COLUMNS=80: the "wrote FOLDER" line would wrap and its tail differ
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(console, "_width", None)

    folder = tmp_path / "runs"
    folder.mkdir()
    for k, n in enumerate((60, 90, 120)):
        _write(folder / f"r{k}.jsonl", n, k)
    monkeypatch.setattr(cli_diag, "_workers", lambda n: 2)
    assert main(["diagnose", str(folder), "--out", str(tmp_path / "pool"), "--no-plot", "--no-validity"]) == 0
    pooled = capsys.readouterr().out
    monkeypatch.setattr(cli_diag, "_workers", lambda n: 1)
    assert main(["diagnose", str(folder), "--out", str(tmp_path / "one"), "--no-plot", "--no-validity"]) == 0
    single = capsys.readouterr().out
    a = json.loads((tmp_path / "pool" / "diagnosis.json").read_text())["runs"]
    b = json.loads((tmp_path / "one" / "diagnosis.json").read_text())["runs"]
    assert [r["run"] for r in a] == [r["run"] for r in b] and len(a) == 3
    assert a == b
    strip = lambda s: [x for x in s.splitlines() if not x.startswith("wrote ")]  # noqa: E731
    assert strip(pooled) == strip(single)
    assert all((tmp_path / "pool" / r["run"] / "diagnosis.json").is_file() for r in a)
