"""The experiment harness (grpojax._experiment): command line, Claim rows, summary.json as `grpojax reproduce` reads it."""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

from grpojax._experiment import (SUMMARY_FILE, VERDICTS, Claim, committed_predictions, experiment_parser, parse_args,
                                 print_claims, write_summary)
from grpojax.cli._reproduce import write_report


def test_parser_defaults_and_output_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ap = experiment_parser("demo", "Demo experiment.\n\n  indented line kept", quick_help="tiny sizes")
    ap.add_argument("--steps", type=int, default=3)
    args = parse_args(ap, [])
    assert args.quick is False and args.steps == 3
    assert args.out == pathlib.Path("out/demo") and (tmp_path / "out" / "demo").is_dir()
    args = parse_args(ap, ["--quick", "--out", str(tmp_path / "a" / "b"), "--steps", "7"])
    assert args.quick is True and args.steps == 7 and (tmp_path / "a" / "b").is_dir()
    text = ap.format_help()
    assert "  indented line kept" in text and "tiny sizes" in text and "default out/demo" in text


def test_summary_is_the_format_reproduce_reads(tmp_path):
    claims = [Claim("paper claim", "1.5 vs 1.4", "confirmed", paper="the paper says so"),
              Claim(claim="own claim", paper=None, measured="nan everywhere", verdict="not_tested")]
    path = write_summary(tmp_path / "demo", "demo", quick=np.bool_(True), claims=claims, figures=["f.png"],
                         table=np.array([1.0, np.nan]), seconds=2.5)
    assert path == tmp_path / "demo" / SUMMARY_FILE
    data = json.loads(path.read_text())
    assert list(data) == ["experiment", "quick", "claims", "figures", "table", "seconds"]
    assert data["experiment"] == "demo" and data["quick"] is True and data["figures"] == ["f.png"]
    assert data["claims"] == [
        {"claim": "paper claim", "paper": "the paper says so", "measured": "1.5 vs 1.4", "verdict": "confirmed"},
        {"claim": "own claim", "paper": None, "measured": "nan everywhere", "verdict": "not_tested"},
    ]
    assert data["table"][0] == 1.0 and data["table"][1] is None and math.isclose(data["seconds"], 2.5)

    results = {"thresholds_table": dict(status="ok", summary=data, seconds=1.0, command="x.py")}
    report = write_report(tmp_path, results, quick=True).read_text()
    assert "| thresholds_table | paper claim | the paper says so | 1.5 vs 1.4 | **confirmed** |" in report
    own = report.split("## grpojax's own additions", 1)[1]
    assert "| thresholds_table | own claim | — | nan everywhere | **not_tested** |" in own
    assert "![thresholds_table: f.png](thresholds_table/f.png)" in report


@pytest.mark.parametrize(("claims", "results", "needle"), [
    ([Claim("c", "m", "maybe")], {}, "maybe"),
    ([{"claim": "c", "paper": None, "measured": "m", "verdict": "confirmed"}], {}, "Claim"),
    ([Claim("c", "m", "partial")], {"experiment": "other"}, "experiment"),
])
def test_bad_summaries_are_value_errors(tmp_path, claims, results, needle):
    with pytest.raises(ValueError, match=needle):
        write_summary(tmp_path, "demo", quick=False, claims=claims, figures=[], **results)
    assert not (tmp_path / SUMMARY_FILE).exists()


def test_print_claims(capsys):
    print_claims([Claim("c1", "m1", VERDICTS[0]), Claim("c2", "m2", "refuted", paper="p")])
    assert capsys.readouterr().out == "[confirmed] c1\n    m1\n[refuted] c2\n    m2\n"


def test_committed_predictions_are_read_for_their_own_mode_only(tmp_path):
    (tmp_path / "predictions.json").write_text(json.dumps({"quick": True, "predictions": [1, 2]}))
    assert committed_predictions(tmp_path, True)["predictions"] == [1, 2]
    with pytest.raises(SystemExit, match="written with quick=True; pass the same --quick"):
        committed_predictions(tmp_path, False)
