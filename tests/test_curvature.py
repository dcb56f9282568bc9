"""``grpojax curvature`` / :func:`grpojax.grpo.measure_curvature`: K_0 and K_d against dense Hessians on a
tiny causal LM, the per-completion interval sums against the Lanczos Rayleigh quotients, the JSON read back
by predict / advise / watch and the TRL callback, and one-line refusals of bad input."""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.flatten_util import ravel_pytree

from grpojax.cli._app import main
from grpojax.grpo import measure_curvature
from grpojax.grpo._data import Problem
from grpojax.grpo._logprobs import completion_logprobs
from grpojax.lm import CausalLM, ModelConfig, Tokenizer, char_tokenizer, codec_from_tokenizer, save_pretrained

REAL_MODEL = pathlib.Path(__file__).resolve().parents[1] / "models" / "smollm2-135m-instruct"
PAIRS = [(1, 2), (3, 4), (2, 2), (5, 1), (0, 3), (4, 4)]
REWARD_MODULE = """
def contains_answer(completions, answers):
    return [float(a in c) for c, a in zip(completions, answers)]

def wrong_length(completions, answers):
    return [1.0]
"""


def contains_answer(completions, answers):
    return np.array([float(a in c) for c, a in zip(completions, answers)])


def _tiny(hidden=2, vocab_chars="0123456789+= "):
    tok = Tokenizer.from_codec(codec_from_tokenizer(char_tokenizer(vocab_chars)))
    mc = ModelConfig(vocab_size=tok.vocab_size, hidden_size=hidden, intermediate_size=hidden, num_hidden_layers=1,
                     num_attention_heads=1, num_key_value_heads=1, head_dim=hidden, rope_theta=10000.0,
                     tie_word_embeddings=True, attention_bias=True, max_position_embeddings=64,
                     eos_token_id=(tok.eos_id,), pad_token_id=tok.pad_id, model_type="qwen2")
    return CausalLM(mc, rngs=nnx.Rngs(0), dtype=jnp.float32, param_dtype=jnp.float32), tok


def _problems():
    return [Problem(f"{a}+{b}=", str((a + b) % 10)) for a, b in PAIRS]


@pytest.fixture(scope="module")
def measured():
    model, tok = _tiny()
    res = measure_curvature(model, tok, _problems(), contains_answer, group_size=4, max_new_tokens=3, iters=400,
                            rtol=1e-7, n_boot=300, seed=1)
    return model, tok, res


def _dense(model, res, s=None):
    """K_0 and K_d as dense matrices: blocks of jax.hessian of the same surrogate over (θ, θ_b), flattened
    (on the Lanczos batch, or on the batch ``s``)."""
    s = res.samples if s is None else s
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    flat, unravel = ravel_pytree(params)
    cm = jnp.asarray(s["completion_mask"], jnp.float32)
    c = jnp.asarray(s["advantages"] / s["completion_mask"].sum(), jnp.float32)

    def ell(x):
        lp, _ = completion_logprobs(nnx.merge(graphdef, unravel(x), rest), jnp.asarray(s["prompt"]),
                                    jnp.asarray(s["prompt_mask"]), jnp.asarray(s["completion"]),
                                    temperature=res.settings["temperature"])
        return (lp * cm).sum(-1)

    ell0 = ell(flat)
    n = flat.size

    def surrogate(z):
        x, y = z[:n], z[n:]
        return jnp.sum(c * jnp.exp(ell(y) - ell0) * ell(x))

    H = np.asarray(jax.hessian(surrogate)(jnp.concatenate([flat, flat])), np.float64)
    return -H[:n, :n], -H[:n, n:]


@pytest.mark.slow  # tens of seconds on 2 cores: Lanczos to full dimension / a model saved and loaded
def test_k0_kd_match_the_dense_hessian(measured):
    model, _, res = measured
    assert 0 < res.pass_rate.value < 1  # groups with both outcomes: a nonzero update
    k0, kd = _dense(model, res)
    k0, kd = 0.5 * (k0 + k0.T), 0.5 * (kd + kd.T)
    ev0, evd = np.linalg.eigvalsh(k0), np.linalg.eigvalsh(kd)
    evt, vt = np.linalg.eigh(k0 + kd)
    scale = np.abs(evt).max()
    assert abs(res.k_instant_leading - ev0[-1]) <= 0.01 * abs(ev0[-1])
    assert abs(res.k_stale_leading - evd[-1]) <= 0.01 * abs(evd[-1])
    assert abs(res.total - evt[-1]) <= 0.01 * abs(evt[-1])
    v = vt[:, -1]  # the stiffest direction: the Rayleigh quotients the model takes
    assert abs(res.k_instant.value - v @ k0 @ v) <= 0.01 * scale
    assert abs(res.k_stale.value - v @ kd @ v) <= 0.01 * scale


@pytest.mark.slow  # tens of seconds on 2 cores: Lanczos to full dimension / a model saved and loaded
def test_intervals_bracket_the_estimates(measured):
    _, _, res = measured
    for e in (res.k_instant, res.k_stale, res.sigma2, res.pass_rate):
        assert e.low <= e.value <= e.high
    rewards = res.samples["rewards"]
    assert res.pass_rate.value == pytest.approx(np.mean(rewards > 0))
    assert res.mean_reward == pytest.approx(rewards.mean())


def _write_model(tmp_path):
    model, tok = _tiny(hidden=4)
    folder = tmp_path / "model"
    save_pretrained(model, folder, tokenizer=tok)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"question": f"{a}+{b}=", "answer": f"#### {(a + b) % 10}"}) + "\n"
                               for a, b in PAIRS))
    (tmp_path / "my_rewards.py").write_text(REWARD_MODULE)
    return folder, prompts


@pytest.fixture
def cli_run(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    folder, prompts = _write_model(tmp_path)
    out = tmp_path / "out"
    rc = main(["curvature", "--model", str(folder), "--prompts", str(prompts), "--reward", "my_rewards:contains_answer",
               "--group-size", "4", "--max-new-tokens", "3", "--iters", "6", "--out", str(out)])
    assert rc == 0
    return tmp_path, folder, prompts, out / "curvature.json"


@pytest.mark.slow  # tens of seconds on 2 cores: Lanczos to full dimension / a model saved and loaded
def test_cli_writes_json_read_by_predict_and_advise(cli_run, capsys):
    tmp_path, _, _, path = cli_run
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == 1 and doc["settings"]["group_size"] == 4
    for key in ("K_0", "K_d", "sigma2", "pass_rate"):
        lo, hi = doc[key]["interval"]
        assert lo <= doc[key]["value"] <= hi
    assert set(doc["timings"]) >= {"load_s", "sample_s", "lanczos_s", "total_s"}
    if not doc["K_d"]["value"] > 0 or doc["K_0"]["value"] < 0:
        pytest.skip(f"this draw measured K_d = {doc['K_d']['value']:.3g}, K_0 = {doc['K_0']['value']:.3g}")
    kd, k0, s2 = doc["K_d"]["value"], doc["K_0"]["value"], doc["sigma2"]["value"]
    # predict from the file == predict with the same numbers given as flags
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["predict", "--from", str(path), "--eta", "0.01", "--k-ref", "2", "--out", str(tmp_path / "p1"),
                 "--json", str(a)]) == 0
    assert main(["predict", "--eta", "0.01", "--k-ref", "2", "--curvature", repr(kd), "--k-instant", repr(k0),
                 "--noise", repr(s2), "--group-size", "4", "--out", str(tmp_path / "p2"), "--json", str(b)]) == 0
    assert json.loads(a.read_text()) == json.loads(b.read_text())
    capsys.readouterr()
    assert main(["advise", "--from", str(path), "--eta", "0.01", "--k-ref", "2", "--pass-rate", "0.5"]) == 0
    from_file = capsys.readouterr().out
    assert main(["advise", "--curvature", repr(kd), "--k-instant", repr(k0), "--noise", repr(s2), "--group-size", "4",
                 "--eta", "0.01", "--k-ref", "2", "--pass-rate", "0.5"]) == 0
    given = capsys.readouterr().out
    assert from_file == given


@pytest.mark.slow  # tens of seconds on 2 cores: Lanczos to full dimension / a model saved and loaded
def test_watch_and_trl_callback_take_the_json(cli_run, tmp_path):
    _, _, _, path = cli_run
    from grpojax._curvature_file import curvature_meta

    doc = json.loads(path.read_text())
    if not doc["K_d"]["value"] > 0 or doc["K_0"]["value"] < 0:
        pytest.skip("this draw measured a K_d <= 0 or K_0 < 0 (refused by design)")
    meta = curvature_meta(path)
    assert meta == {"curvature": doc["K_d"]["value"], "k_instant": doc["K_0"]["value"],
                    "gradient_noise": doc["sigma2"]["value"]}
    pytest.importorskip("transformers")
    from grpojax.monitor import trl_callback

    cb = trl_callback(curvature=path, meta={"eta": 0.01, "curvature": 99.0})
    assert cb.hook.meta["curvature"] == doc["K_d"]["value"] and cb.hook.meta["eta"] == 0.01
    # watch: the margin is computed from the file's K_d
    log = tmp_path / "log.jsonl"
    header = {"_grpojax": {"version": 1, "name": "t", "format": "jsonl", "source": "synthetic",
                           "meta": {"eta": 0.01, "k_ref": 2, "curvature": 99.0, "max_steps": 80}}}
    log.write_text(json.dumps(header) + "\n" + "".join(
        json.dumps({"step": s, "reward_mean": 0.2 + 0.5 * (1 - np.exp(-s / 10))}) + "\n" for s in range(1, 41)))
    log_meta = tmp_path / "meta.json"
    assert main(["watch", str(log), "--from", str(path), "--no-live", "--idle-timeout", "0.5", "--poll", "0.1",
                 "--json", str(log_meta)]) == 0
    stability = json.loads(log_meta.read_text())["stability"]
    assert stability["curvature"] == pytest.approx(doc["K_d"]["value"])  # the file's, over the log's 99


BAD = [
    (["--reward", "no_such_reward"], "no_such_reward"),
    (["--reward", "no_such_module_xyz:f"], "no_such_module_xyz"),
    (["--reward", "my_rewards:missing"], "missing"),
    (["--reward", "my_rewards:wrong_length"], "one reward per completion"),
    (["--reward", "correctness", "--group-size", "1"], "group-size"),
    (["--reward", "correctness", "--temperature", "0"], "temperature"),
]


@pytest.mark.parametrize("extra,needle", BAD, ids=[b[1] for b in BAD])
def test_bad_input_is_one_line(extra, needle, tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(tmp_path))
    folder, prompts = _write_model(tmp_path)
    args = ["curvature", "--model", str(folder), "--prompts", str(prompts), "--group-size", "2", "--max-new-tokens",
            "2", "--iters", "2", "--out", str(tmp_path / "o")]
    try:
        rc = main(args + extra)
    except SystemExit as exc:
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


def test_bad_files_are_one_line(tmp_path, capsys):
    folder, prompts = _write_model(tmp_path)
    bad_prompts = tmp_path / "bad.jsonl"
    bad_prompts.write_text('{"text": "no answer"}\n')
    not_json = tmp_path / "c.json"
    not_json.write_text("{")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema_version": 99}))
    cases = [
        (["curvature", "--model", str(tmp_path / "nope"), "--prompts", str(prompts), "--reward", "correctness",
          "--group-size", "2", "--out", str(tmp_path / "o")], "nope"),
        (["curvature", "--model", str(folder), "--prompts", str(bad_prompts), "--reward", "correctness",
          "--group-size", "2", "--out", str(tmp_path / "o")], "bad.jsonl"),
        (["predict", "--from", str(not_json), "--eta", "0.1", "--k-ref", "2"], "c.json"),
        (["predict", "--from", str(other), "--eta", "0.1", "--k-ref", "2"], "schema_version"),
        (["predict", "--eta", "0.1", "--k-ref", "2"], "--curvature"),
        (["advise", "--from", str(other), "--eta", "0.1", "--k-ref", "2"], "other.json"),
    ]
    for argv, needle in cases:
        rc = main(argv)
        assert rc == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err


def test_an_unreadable_from_file_names_the_flag(tmp_path, capsys):
    """A missing, over-long or malformed --from file: one line naming --from, for every command that takes it."""
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema_version": 99}))
    log = pathlib.Path(__file__).parent / "fixtures" / "quickstart" / "trainer_state.json"
    tails = {"predict": ["--eta", "0.1", "--k-ref", "2"], "advise": ["--eta", "0.1", "--k-ref", "2"],
             "watch": [str(log), "--no-live", "--idle-timeout", "0.05", "--json", str(tmp_path / "w.json")]}
    for command, tail in tails.items():
        for path in (tmp_path / "missing.json", "x" * 300, other):
            assert main([command, *tail, "--from", str(path)]) == 2, (command, path)
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and "--from" in err, err


def test_nonpositive_kd_is_refused_when_read(tmp_path, capsys):
    from grpojax._curvature_file import read_curvature

    doc = {"schema_version": 1, "K_d": {"value": -0.1}, "K_0": {"value": 0.2}, "sigma2": {"value": 0.1, "group_size": 4},
           "pass_rate": {"value": 0.5}}
    path = tmp_path / "curvature.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="K_d"):
        read_curvature(path)
    assert main(["predict", "--from", str(path), "--eta", "0.1", "--k-ref", "2"]) == 2
    assert "K_d" in capsys.readouterr().err


@pytest.mark.real_model
@pytest.mark.slow
def test_real_model_curvature(tmp_path):
    if not (REAL_MODEL / "config.json").is_file():
        pytest.skip(f"{REAL_MODEL} is absent (make real-model)")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"question": f"What is {a} + {b}? Answer with the number.",
                                           "answer": str(a + b)}) + "\n" for a, b in PAIRS[:2]))
    out = tmp_path / "out"
    assert main(["curvature", "--model", str(REAL_MODEL), "--prompts", str(prompts), "--reward", "correctness",
                 "--group-size", "2", "--max-new-tokens", "8", "--iters", "3", "--out", str(out)]) == 0
    doc = json.loads((out / "curvature.json").read_text())
    assert doc["model"]["n_params"] > 100_000_000
    assert all(np.isfinite(doc[k]["value"]) for k in ("K_0", "K_d", "sigma2", "pass_rate"))


@pytest.mark.slow  # tens of seconds on 2 cores: Lanczos to full dimension and two dense Hessians
def test_holdout_quotients_match_the_dense_hessian_of_the_holdout_batch():
    model, tok = _tiny()
    res = measure_curvature(model, tok, _problems(), contains_answer, group_size=4, prompts_per_step=2,
                            holdout_prompts=4, max_new_tokens=3, iters=400, rtol=1e-7, n_boot=300, seed=1)
    s = res.samples
    held = s["holdout"]
    assert res.n_prompts == 4 and held["completion"].shape[0] == 4 * 4
    lanczos_rows = {tuple(r[m]) for r, m in zip(s["prompt"], s["prompt_mask"])}
    held_rows = {tuple(r[m]) for r, m in zip(held["prompt"], held["prompt_mask"])}
    assert len(held_rows) == 4 and not lanczos_rows & held_rows  # four prompts the direction never saw
    v = s["direction"]
    k0_l, kd_l = _dense(model, res)  # the Lanczos batch: v is the stiffest direction of its K_0 + K_d
    evt = np.linalg.eigvalsh(0.5 * (k0_l + k0_l.T) + 0.5 * (kd_l + kd_l.T))
    assert abs(v @ (k0_l + kd_l) @ v - evt[-1]) <= 0.01 * np.abs(evt).max()
    k0, kd = _dense(model, res, held)  # chunked forward-mode quotients = the dense held-out Hessians along v
    scale = max(abs(v @ k0 @ v), abs(v @ kd @ v))
    assert abs(res.k_instant.value - v @ k0 @ v) <= 1e-3 * scale
    assert abs(res.k_stale.value - v @ kd @ v) <= 1e-3 * scale
    assert res.pass_rate.value == pytest.approx(np.mean(held["rewards"] > 0))
    for e in (res.k_instant, res.k_stale, res.sigma2, res.pass_rate):
        assert e.low <= e.value <= e.high


@pytest.mark.slow  # about 30 s on 2 cores: a dense Hessian of the held-out batch
def test_update_direction_is_the_mean_update_and_its_quotients_match_the_dense_hessian():
    model, tok = _tiny()
    def graded(completions, answers):  # separates distinct completions: every group has a nonzero advantage
        return [float(sum(map(ord, c)) % 7) for c in completions]

    calls = []
    res = measure_curvature(model, tok, _problems(), graded, group_size=4, prompts_per_step=2,
                            holdout_prompts=4, direction="update", max_new_tokens=3, n_boot=300, seed=1,
                            progress=lambda *a: calls.append(a))
    assert [c[0] for c in calls if len(c) == 1] == ["sampling", "scoring", "update", "held-out prompts", "intervals"]
    assert [c[1] for c in calls if len(c) == 2] == [0.5, 1.0]  # two chunks of the 4 held-out prompts (2 at a time)
    s = res.samples
    assert res.k_stale_leading is None and res.converged is None and "mean update" in str(res)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    flat, unravel = ravel_pytree(params)
    cm = jnp.asarray(s["completion_mask"], jnp.float32)
    c = jnp.asarray(s["advantages"] / s["completion_mask"].sum(), jnp.float32)

    def surrogate(x):  # Σ c_i ℓ_i on the direction prompts, all at once (the command sums it over chunks)
        lp, _ = completion_logprobs(nnx.merge(graphdef, unravel(x), rest), jnp.asarray(s["prompt"]),
                                    jnp.asarray(s["prompt_mask"]), jnp.asarray(s["completion"]),
                                    temperature=res.settings["temperature"])
        return jnp.sum(c * (lp * cm).sum(-1))

    u = np.asarray(jax.grad(surrogate)(flat), np.float64)
    np.testing.assert_allclose(s["direction"], u / np.linalg.norm(u), atol=1e-5)
    v = s["direction"]
    k0, kd = _dense(model, res, s["holdout"])
    scale = max(abs(v @ k0 @ v), abs(v @ kd @ v))
    assert abs(res.k_instant.value - v @ k0 @ v) <= 1e-3 * scale
    assert abs(res.k_stale.value - v @ kd @ v) <= 1e-3 * scale
    assert res.k_total.value == pytest.approx(res.k_instant.value + res.k_stale.value, rel=1e-9)
    assert res.k_total.low <= res.k_total.value <= res.k_total.high
    json.dumps(res.to_dict())  # None leading eigenvalues are written as null


@pytest.mark.slow  # two measurements through the command line: tens of seconds on 2 cores
def test_cli_config_measures_on_the_training_configuration(tmp_path, capsys):
    folder, _ = _write_model(tmp_path)
    prompts = tmp_path / "train.jsonl"
    prompts.write_text("".join(json.dumps({"question": f"{a}+{b}=", "answer": f"#### {(a + b) % 10}"}) + "\n"
                               for a in range(5) for b in range(4)))
    config = tmp_path / "config.yaml"
    config.write_text(f"""name: t
model: {{pretrained: {folder}}}
data: {{source: jsonl, path: {prompts}, heldout_frac: 0.2, prompt_template: "{{question}}", chat_template: false}}
rewards: {{weights: {{correctness: 1.0}}}}
sampling: {{max_new_tokens: 3, temperature: 0.7}}
grpo: {{group_size: 3, prompts_per_step: 2, advantage: dr_grpo}}
eval: {{n: 1}}
""")
    out = tmp_path / "out"
    assert main(["curvature", "--config", str(config), "--prompts-per-step", "2", "--holdout-prompts", "2",
                 "--iters", "2", "--out", str(out)]) == 0
    st = json.loads((out / "curvature.json").read_text())["settings"]
    assert (st["group_size"], st["temperature"], st["max_new_tokens"], st["advantage"]) == (3, 0.7, 3, "dr_grpo")
    assert st["config"] == str(config) and st["reward"] == "1·correctness" and st["holdout_prompts"] == 2
    # a flag given overrides the configuration's value
    assert main(["curvature", "--config", str(config), "--group-size", "2", "--temperature", "1.3",
                 "--prompts-per-step", "2", "--iters", "2", "--out", str(out)]) == 0
    st = json.loads((out / "curvature.json").read_text())["settings"]
    assert (st["group_size"], st["temperature"], st["max_new_tokens"]) == (2, 1.3, 3)
    capsys.readouterr()
    # without --config the task's flags are required, in one line
    assert main(["curvature", "--model", str(folder), "--group-size", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--prompts, --reward missing" in err[0]
