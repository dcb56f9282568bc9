"""The command line, the detectors and the sampler as users run them: float32, strict promotion off.

The suite runs with x64 and strict promotion (tests/conftest.py). Users run neither, so each case here runs in a
fresh Python process with the library's defaults and is compared with the same call made in this (float64)
process, within stated tolerances.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from grpojax.cli import main

REPO = pathlib.Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "tests" / "fixtures" / "quickstart" / "trainer_state.json"
LM = REPO / "tests" / "fixtures" / "lm"


def _run_plain(code: str, timeout: int = 300) -> str:
    """Run ``code`` in a new interpreter with the library's defaults (no x64) and return its stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_ENABLE_X64", "JAX_NUMPY"))}
    env["JAX_PLATFORMS"] = "cpu"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env,
                         cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def test_cli_fit_diagnose_predict_float32_agree_with_float64(tmp_path):
    out32 = tmp_path / "f32"
    _run_plain(
        "import jax\n"
        "assert not jax.config.jax_enable_x64\n"
        "from grpojax.cli import main\n"
        f"assert main(['fit', {str(QUICKSTART)!r}, '--no-plot', '--out', {str(out32 / 'fit')!r}]) == 0\n"
        f"assert main(['diagnose', {str(QUICKSTART)!r}, '--no-plot', '--out', {str(out32 / 'diag')!r}]) == 0\n"
        "assert main(['predict', '--eta', '0.01', '--mu', '0.9', '--k-ref', '4', '--curvature', '0.5', "
        f"'--out', {str(out32 / 'pred')!r}]) == 0\n"
    )
    out64 = tmp_path / "f64"
    assert main(["fit", str(QUICKSTART), "--no-plot", "--out", str(out64 / "fit")]) == 0
    assert main(["diagnose", str(QUICKSTART), "--no-plot", "--out", str(out64 / "diag")]) == 0
    assert main(["predict", "--eta", "0.01", "--mu", "0.9", "--k-ref", "4", "--curvature", "0.5",
                 "--out", str(out64 / "pred")]) == 0

    f32 = json.loads((out32 / "fit" / "fit.json").read_text())
    f64 = json.loads((out64 / "fit" / "fit.json").read_text())
    for (_, r32), (_, r64) in zip(f32["runs"].items(), f64["runs"].items()):
        for law, l64 in r64["laws"].items():
            l32 = r32["laws"][law]
            assert l32["status"] == l64["status"], law
            # least squares in float32 vs float64 on a noisy 300-point curve: R² to 1e-3, plateau to 2%
            assert l32["r2"] == pytest.approx(l64["r2"], abs=1e-3), law
            p64 = l64["params"].get("r_inf", l64["params"].get("A"))
            p32 = l32["params"].get("r_inf", l32["params"].get("A"))
            assert p32 == pytest.approx(p64, rel=0.02), law

    d32 = json.loads((out32 / "diag" / "diagnosis.json").read_text())
    d64 = json.loads((out64 / "diag" / "diagnosis.json").read_text())
    verdicts = lambda d: json.dumps(d, sort_keys=True).count('"detected"')  # noqa: E731
    assert verdicts(d32) == verdicts(d64)

    p32 = json.loads((out32 / "pred" / "prediction.json").read_text())
    p64 = json.loads((out64 / "pred" / "prediction.json").read_text())
    assert p32["regime"] == p64["regime"]
    for k in ("M", "C", "K_eff", "damping_ratio"):
        assert p32[k] == pytest.approx(p64[k], rel=1e-5), k
    assert p32["exact"]["critical_eta"] == pytest.approx(p64["exact"]["critical_eta"], rel=1e-4)


@pytest.mark.parametrize("name", ["qwen2", "llama"])
def test_greedy_generation_float32_equals_transformers(name):
    """The sampler with float32 parameters and no x64: greedy tokens equal transformers' (reference.npz)."""
    out = _run_plain(
        "import json, numpy as np, jax\n"
        "assert not jax.config.jax_enable_x64\n"
        "from grpojax.lm import generate, load_pretrained\n"
        f"d = {str(LM / name)!r}\n"
        "m = load_pretrained(d); ref = dict(np.load(d + '/reference.npz'))\n"
        "o = generate(m, ref['tokens'], ref['mask'], key=None, max_new_tokens=8, greedy=True,\n"
        "             eos_id=m.config.eos_token_id, pad_id=m.config.pad_token_id)\n"
        "print(json.dumps({'completion': np.asarray(o.completion).tolist(),\n"
        "                  'mask': np.asarray(o.completion_mask).tolist(),\n"
        "                  'dtype': str(np.asarray(o.logprobs).dtype)}))\n"
    )
    res = json.loads(out.strip().splitlines()[-1])
    ref = dict(np.load(LM / name / "reference.npz"))
    mask = np.asarray(res["mask"], bool)
    assert res["dtype"] == "float32"
    np.testing.assert_array_equal(np.where(mask, np.asarray(res["completion"]), -1),
                                  np.where(mask, ref["greedy"][:, : mask.shape[1]], -1))
