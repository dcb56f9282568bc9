"""`grpojax reproduce` through the CLI entry point, on the fast thresholds experiment and a fake failing one."""

import json

import pytest

from grpojax.cli import main


@pytest.fixture
def fake_experiments(tmp_path):
    d = tmp_path / "experiments"
    d.mkdir()
    (d / "thresholds_table.py").write_text(
        "import argparse, json, pathlib\n"
        "ap = argparse.ArgumentParser(); ap.add_argument('--out'); ap.add_argument('--quick', action='store_true')\n"
        "a = ap.parse_args(); o = pathlib.Path(a.out); o.mkdir(parents=True, exist_ok=True)\n"
        "(o / 'summary.json').write_text(json.dumps({'experiment': 'x', 'quick': a.quick, 'figures': [],\n"
        "  'claims': [{'claim': 'c1', 'paper': 'p1', 'measured': 'm1', 'verdict': 'confirmed'},\n"
        "             {'claim': 'c2', 'paper': None, 'measured': 'm2', 'verdict': 'partial'}]}))\n"
    )
    (d / "sde_validation.py").write_text("raise SystemExit('boom: deliberate failure')\n")
    return d


def test_reproduce_writes_report_and_reports_failures(tmp_path, fake_experiments, capsys):
    out = tmp_path / "report"
    rc = main(["reproduce", "--quick", "--out", str(out), "--experiments-dir", str(fake_experiments),
               "--only", "thresholds_table", "--only", "sde_validation"])
    assert rc == 1  # one experiment failed, and that is not hidden
    report = (out / "report.md").read_text()
    assert "| thresholds_table | c1 | p1 | m1 | **confirmed** |" in report
    assert "grpojax's own additions" in report and "| thresholds_table | c2 |" in report
    assert "experiment failed" in report and "boom" in report
    data = json.loads((out / "reproduce.json").read_text())
    assert data["sde_validation"]["status"] == "failed"


def test_reproduce_unknown_experiment_is_one_line_error(tmp_path, capsys):
    rc = main(["reproduce", "--only", "nope", "--out", str(tmp_path)])
    assert rc == 2
    assert "unknown experiment" in capsys.readouterr().err
