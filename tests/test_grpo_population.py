"""Population training (``train_population``) and its pieces.

Default suite (cheap): the in-program reward against the text scorer on random token strings, member and
population-file validation.

``slow`` (each compiles the sampler or the population program, tens of seconds on 2 CPU cores): the traceable
sampler against teacher forcing; a population equals the
same members trained one after another by the same member program (jit, one device; and on 2 forced
CPU devices in a child process); a diverging member is frozen and flagged and leaves every other member
bit for bit as without it; ``grpojax train --population`` writes one canonical run log per member that
``grpojax.logs.read_log`` reads.
"""

from __future__ import annotations

import json
import pathlib
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _procs import REPO, GRPOJAX
from _procs import clean_env as _clean_env
from _procs import run_bounded as _run

_OVERRIDES = ["steps=6", "warmstart.steps=20", "eval.n=8", "eval.every=3", "grpo.prompts_per_step=2",
              "grpo.group_size=4", "rewards.weights={correctness: 1.0, format: 0.5}", "sampling.max_new_tokens=12",
              "model.hidden_size=32", "model.intermediate_size=64", "model.num_hidden_layers=1",
              "model.num_attention_heads=2", "model.num_key_value_heads=1"]


def _cfg(*extra):
    from grpojax.grpo import apply_overrides, load_config

    return apply_overrides(load_config("tiny-arith"), _OVERRIDES + list(extra))


# ------------------------------------------------------------------------------------------ cheap pieces
def _word_tokenizer():
    from grpojax.grpo import arith_problems
    from grpojax.lm import codec_from_tokenizer, word_tokenizer

    corpus = [p.question + "\n" + p.solution for d in range(1, 6) for p in arith_problems(300, difficulty=d)]
    tok = word_tokenizer(corpus)
    return tok, codec_from_tokenizer(tok)


def test_token_reward_matches_text_scorer_on_random_strings():
    """``hash_answer_rewards`` on token ids == ``score_completions`` (correctness, format) on the decoded text,
    for random strings of digits, ``####``, spaces, newlines, signs, dots, slashes, words and special tokens."""
    from grpojax.grpo import score_completions
    from grpojax.grpo._token_reward import hash_answer_rewards, token_classes

    tok, codec = _word_tokenizer()
    cls = token_classes(tok)
    pieces = list("0123456789") + ["####", " ", "\n", "-", "+", ".", "/", "=", " pens", "<eos>", "<unk>", "<pad>"]
    alphabet = [tok.token_to_id(x) for x in pieces]
    w = np.array([3] * 4 + [1] * 6 + [8, 6, 3, 2, 1, 2, 2, 1, 1, 1, 1, 1], float)
    rng = np.random.default_rng(1)
    S, N = 1500, 12
    ids = rng.choice(alphabet, size=(S, N), p=w / w.sum()).astype(np.int32)
    first_eos = np.where((ids == codec.eos_id).any(1), (ids == codec.eos_id).argmax(1) + 1, N)
    mask = np.arange(N)[None, :] < first_eos[:, None]
    answers = rng.integers(0, 4, size=S)
    correct, stated = jax.jit(hash_answer_rewards)(jnp.asarray(ids), jnp.asarray(mask), jnp.asarray(answers), cls)
    texts = [codec.decode(r[m]) for r, m in zip(ids, mask)]
    want = score_completions(texts, [str(a) for a in answers], {"correctness": 1.0, "format": 1.0})
    assert want.correct.sum() > 50 and 0.2 < want.components["format"].mean() < 0.95  # both outcomes occur
    bad = np.flatnonzero(np.asarray(correct) != want.correct)
    assert bad.size == 0, [(texts[i], int(answers[i])) for i in bad[:5]]
    np.testing.assert_array_equal(np.asarray(stated), want.components["format"])


def test_token_classes_refuse_a_vocabulary_without_hash_or_with_multi_digit_tokens():
    from tokenizers import Tokenizer, models

    from grpojax.grpo._token_reward import token_classes
    from grpojax.lm import char_tokenizer

    with pytest.raises(ValueError, match="no '####' token"):
        token_classes(char_tokenizer())
    bpe_like = Tokenizer(models.WordLevel({"<unk>": 0, "####": 1, "12": 2}, unk_token="<unk>"))
    with pytest.raises(ValueError, match="'12'.*mixes digits"):
        token_classes(bpe_like)


@pytest.mark.slow  # compiles the sampler (about 10 s on a loaded 2-core machine)
def test_sample_completions_logprobs_equal_tempered_teacher_forcing_and_stop_at_eos():
    from grpojax.grpo import completion_logprobs
    from grpojax.grpo._rollout import sample_completions
    from grpojax.lm import ModelConfig, init_model

    mc = ModelConfig(vocab_size=12, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                     num_key_value_heads=1, head_dim=8, max_position_embeddings=32)
    model = init_model(mc, key=jax.random.key(3))
    prompt = jnp.asarray([[0, 0, 5, 6], [7, 8, 9, 10], [0, 4, 4, 4]], jnp.int32)
    pmask = prompt != 0
    comp, logp, cmask = jax.jit(lambda k: sample_completions(
        model, prompt, pmask, k, max_new_tokens=10, temperature=0.7, eos_ids=(1, 2), pad_id=0))(jax.random.key(0))
    comp, logp, cmask = map(np.asarray, (comp, logp, cmask))
    want, _ = jax.jit(lambda c: completion_logprobs(model, prompt, pmask, c, temperature=0.7))(jnp.asarray(comp))
    np.testing.assert_allclose(logp[cmask], np.asarray(want)[cmask], atol=2e-5)
    # independently: log_softmax(logits / 0.7) of a full forward pass, gathered at the sampled tokens
    tokens = jnp.concatenate([prompt, jnp.asarray(comp)], axis=1)
    attn = jnp.concatenate([pmask, jnp.ones(comp.shape, bool)], axis=1)
    logits, _ = model(tokens, jnp.maximum(jnp.cumsum(attn, axis=1) - 1, 0), attention_mask=attn)
    logz = np.asarray(jax.nn.log_softmax(logits[:, prompt.shape[1] - 1 : -1] / 0.7, axis=-1))
    np.testing.assert_allclose(logp[cmask], np.take_along_axis(logz, comp[..., None], -1)[..., 0][cmask], atol=2e-5)
    assert np.all(logp[~cmask] == 0)
    for row, m in zip(comp, cmask):
        n = int(m.sum())
        assert m[:n].all() and not m[n:].any()  # the mask is a prefix
        assert np.all(row[n:] == 0)  # padding after the end
        if n < 10:  # stopped: the last kept token is an EOS, and no EOS before it
            assert row[n - 1] in (1, 2) and not np.isin(row[: n - 1], (1, 2)).any()


def test_member_fields_are_checked_with_one_line_errors():
    from grpojax import ConfigError
    from grpojax.grpo import Member

    m = Member(lr=1)
    assert m.lr == 1.0 and isinstance(m.lr, float) and m == Member(lr=1.0) and hash(m) == hash(Member(lr=1.0))
    assert m.replace(name="x").name == "x" and m.name is None
    for kw, key in [({"lr": -1.0}, "lr"), ({"lr": 0.1, "k_ref": 0}, "k_ref"), ({"lr": 0.1, "momentum": 1.0},
                    "momentum"), ({"lr": 0.1, "rule": "ppo"}, "rule"), ({"lr": float("nan")}, "lr"),
                    ({"lr": 0.1, "seed": -2}, "seed"), ({"lr": 0.1, "name": "a/b"}, "name"),
                    ({"lr": 0.1, "k_ref": 2.5}, "k_ref"), ({"lr": 0.1, "b2": 1.0}, "b2")]:
        with pytest.raises(ConfigError, match=rf"^{key}=") as info:
            Member(**kw)
        assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match=r"^m\.k_ref=0; expected >= 1$"):  # inside a file: the key's place
        Member.from_dict({"lr": 0.1, "k_ref": 0}, key="m")
    with pytest.raises(ConfigError, match="^lr is required$"):
        Member()
    with pytest.raises(ConfigError, match=r"unknown key 'mu'; expected one of \['b1'"):
        Member(lr=0.1, mu=0.9)
    with pytest.raises(AttributeError, match="frozen"):
        m.lr = 2.0


def test_layout_groups_members_by_k_ref_with_the_same_groups_on_every_device():
    from grpojax.grpo import Member
    from grpojax.grpo._population import _layout

    ks = [4, 1, 4, 2, 1, 4, 8]
    members = [Member(lr=0.1, k_ref=k, seed=i) for i, k in enumerate(ks)]
    for n_dev in (1, 2, 3):
        rows, groups, row_of = _layout(members, n_dev)
        block = len(rows) // n_dev
        assert len(rows) == block * n_dev and groups[-1][2] == block
        assert [k for k, _, _ in groups] == [1, 2, 4, 8]
        for d in range(n_dev):  # every device block: the groups in order, each row of the group's k_ref
            for k, lo, hi in groups:
                assert {ks[rows[d * block + r]] for r in range(lo, hi)} == {k}
        assert sorted(row_of) == sorted(set(row_of)) and all(rows[row_of[i]] == i for i in range(len(ks)))


def test_rollout_due_is_the_periodic_refresh():
    from grpojax.grpo import rollout_due

    due, lag = zip(*(rollout_due(step, 3) for step in range(1, 8)))
    assert due == (True, False, False, True, False, False, True) and lag == (0, 1, 2, 0, 1, 2, 0)
    d, g = rollout_due(jnp.asarray([5, 5, 5], jnp.int32), jnp.asarray([1, 2, 4], jnp.int32))
    assert np.asarray(d).tolist() == [True, True, True] and np.asarray(g).tolist() == [0, 0, 0]


def _write(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    p = tmp_path / "pop.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_population_file_members_grid_defaults_and_group_size_buckets(tmp_path):
    from grpojax.grpo._population_spec import load_population_spec

    spec = load_population_spec(_write(tmp_path, """
        config: tiny-arith
        set: [steps=7]
        optimizer: adam
        defaults: {b1: 0.8}
        members:
          - {lr: 0.01, name: base, group_size: 4}
        grid:
          lr: [0.1, 0.2]
          k_ref: [1, 4]
        """))
    spec, cfg, buckets = spec
    assert cfg.steps == 7 and spec.optimizer == "adam" and spec.kl_reference == "behaviour"
    sizes = [g for g, _ in buckets]
    assert sizes == [4, 8]  # the grid members get the config's group size (tiny-arith: 8)
    (_, four), (_, eight) = buckets
    assert [m.name for m in four] == ["base"] and four[0].b1 == 0.8
    assert [(m.lr, m.k_ref) for m in eight] == [(0.1, 1), (0.1, 4), (0.2, 1), (0.2, 4)]
    assert all(m.b1 == 0.8 for m in eight) and len({m.name for m in eight}) == 4


@pytest.mark.parametrize(("text", "match"), [
    ("config: tiny-arith\nmembrs: []\n", r"pop.yaml: unknown key 'membrs'; expected one of \['chunk', 'config'"),
    ("members: [{lr: 0.1}]\n", r"pop.yaml: config is required$"),
    ("config: tiny-arith\n", r"no members; expected a members list and/or a grid"),
    ("config: tiny-arith\nmembers: [{lr: 0.1, k_ref: 0}]\n", r"members\[0\]\.k_ref=0; expected >= 1"),
    ("config: tiny-arith\nmembers: [{lr: 0.1, mu: 0.9}]\n", r"members\[0\]: unknown key 'mu'; expected one of \['b1'"),
    ("config: tiny-arith\nmembers: [{k_ref: 2}]\n", r"members\[0\]\.lr is required"),
    ("config: tiny-arith\nmembers: [3]\n", r"members\[0\]=3; expected a valid dictionary"),
    ("config: tiny-arith\nmembers: {lr: 0.1}\n", r"members=\{'lr': 0.1\}; expected a valid list"),
    ("config: tiny-arith\ndefaults: {mu: 1}\nmembers: [{lr: 0.1}]\n", r"defaults: unknown key 'mu'"),
    ("config: tiny-arith\ngrid: {lr: []}\n", r"grid\.lr=\[\]; expected a non-empty list"),
    ("config: tiny-arith\ngrid: {lr: 0.1}\n", r"grid\.lr=0\.1; expected a valid list"),
    ("config: tiny-arith\ngrid: {mu: [0.1]}\n", r"grid: unknown key 'mu'"),
    ("config: tiny-arith\ngrid: {name: [a]}\n", r"grid\.name: names are given to grid members automatically"),
    ("config: tiny-arith\ngrid: {lr: [0.1, -1]}\n", r"grid\[1\] \(lr=-1\)\.lr=-1\.0; expected a finite number > 0"),
    ("config: tiny-arith\noptimizer: rmsprop\nmembers: [{lr: 0.1}]\n", r"optimizer='rmsprop'; expected 'sgd' or 'adam'"),
    ("config: tiny-arith\nkl_reference: old\nmembers: [{lr: 0.1}]\n", r"kl_reference='old'; expected 'behaviour'"),
    ("config: tiny-arith\ngrad_clip: -1\nmembers: [{lr: 0.1}]\n", r"grad_clip=-1\.0; expected a finite number >= 0"),
    ("config: tiny-arith\nchunk: 2.5\nmembers: [{lr: 0.1}]\n", r"chunk=2\.5; expected an integer"),
    ("config: tiny-arith\nmembers: [{lr: 0.1, group_size: 1}]\n", r"members\[0\]\.group_size=1; expected >= 2"),
    ("config: tiny-arith\nmembers: [{lr: 0.1, name: a}, {lr: 0.2, name: a}]\n", r"name 'a' is used twice"),
    ("config: tiny-arith\nset: [grpo.k_ref=0]\nmembers: [{lr: 0.1}]\n", r"k_ref=0"),
    ("config: tiny-arith\nset: grpo.k_ref=2\nmembers: [{lr: 0.1}]\n", r"set='grpo.k_ref=2'; expected a valid list"),
    ("config: no-such-config\nmembers: [{lr: 0.1}]\n", r"no-such-config"),
    ("- config: tiny-arith\n", r"pop.yaml: expected a mapping of keys to values, got list"),
    ("config: [tiny-arith\n", r"pop.yaml: invalid YAML at line"),
])
def test_population_file_errors_are_one_line_and_name_the_key(tmp_path, text, match):
    from grpojax.grpo._population_spec import load_population_spec

    from grpojax import ConfigError

    with pytest.raises(ConfigError, match=match) as info:
        load_population_spec(_write(tmp_path, text))
    assert "\n" not in str(info.value)


def test_population_file_blank_keys_are_their_defaults(tmp_path):
    """A key written without a value (``grid:``) is its default, as the old reader took it."""
    from grpojax.grpo import Member, load_config
    from grpojax.grpo._population_spec import load_population_spec

    spec, cfg, buckets = load_population_spec(_write(tmp_path, """
        config: tiny-arith
        set:
        defaults:
        members: [{lr: 0.1, momentum: 0.5}]
        grid:
        """))
    assert spec.set == [] and spec.grid == {} and cfg == load_config("tiny-arith")
    assert buckets == [(8, [Member(lr=0.1, momentum=0.5, name="m0000")])]


# ------------------------------------------------------------------------------------------ slow: training
@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """One shared warm start for the slow tests of this module."""
    from grpojax.grpo import Member, train_population

    res = train_population(_cfg("steps=1", "eval.n=0"), [Member(lr=0.01)], None, show_progress=False)
    return res.warm


# three K_ref groups (one of two members): rollouts are sampled per group, at its refresh steps
_MEMBERS = [dict(lr=0.05, momentum=0.9, k_ref=2, seed=1), dict(lr=0.1, k_ref=1, beta=0.1, seed=2, rule="none"),
            dict(lr=0.03, k_ref=3, seed=3, rule="unclipped", beta=0.05), dict(lr=0.02, k_ref=2, seed=4)]


def _assert_same(a, b, *, exact: bool, members=None):
    members = range(a.metrics["loss"].shape[1]) if members is None else members
    for k in a.metrics:
        x, y = a.metrics[k][:, members], b.metrics[k][:, members]
        if exact:
            np.testing.assert_array_equal(x, y, err_msg=k)
        else:
            np.testing.assert_allclose(x, y, rtol=1e-4, atol=2e-5, equal_nan=True, err_msg=k)
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)):
        x, y = np.asarray(x)[list(members)], np.asarray(y)[list(members)]
        if exact:
            np.testing.assert_array_equal(x, y)
        else:
            np.testing.assert_allclose(x, y, rtol=1e-4, atol=2e-5)


@pytest.mark.slow
def test_population_equals_members_trained_one_after_another(warm, tmp_path):
    """vmap over members (one jitted program) == the same member program run unbatched for each member."""
    from grpojax.grpo import Member, train_population

    members = [Member(**m) for m in _MEMBERS]
    cfg = _cfg()
    pop = train_population(cfg, members, tmp_path / "pop", chunk=4, show_progress=False, warm=warm)
    seq = train_population(cfg, members, None, chunk=4, show_progress=False, warm=warm, batched=False)
    assert not pop.diverged.any() and not seq.diverged.any()
    # the runs learn something that differs between members: non-zero advantages, moving parameters
    assert np.nanmax(pop.metrics["reward_std"]) > 0 and np.all(pop.metrics["param_dist"][-1] > 1e-3)
    assert len({float(x) for x in pop.metrics["param_dist"][-1]}) == 4
    _assert_same(pop, seq, exact=False)
    # rollouts happen every k_ref steps, per member
    lag = pop.metrics["refresh_lag"]
    np.testing.assert_array_equal(lag[:, 0], [0, 1, 0, 1, 0, 1])
    np.testing.assert_array_equal(lag[:, 2], [0, 1, 2, 0, 1, 2])
    assert np.isnan(pop.metrics["reward_mean"][1, 0]) and np.isfinite(pop.metrics["reward_mean"][1, 1])


@pytest.mark.slow
def test_diverging_member_is_frozen_and_leaves_the_others_bit_identical(warm):
    from grpojax.grpo import Member, train_population

    cfg = _cfg()
    # member 1: two updates per rollout with the unclipped ratio; at lr 1e5 the second update's ratio overflows
    calm = [Member(**m) for m in _MEMBERS]
    calm[1] = Member(**dict(_MEMBERS[1], k_ref=2, rule="unclipped"))
    wild = list(calm)
    wild[1] = Member(**dict(_MEMBERS[1], k_ref=2, rule="unclipped", lr=1e5))
    a = train_population(cfg, calm, None, chunk=4, show_progress=False, warm=warm)
    b = train_population(cfg, wild, None, chunk=4, show_progress=False, warm=warm)
    assert not a.diverged.any()
    assert b.diverged.tolist() == [False, True, False, False] and b.diverged_step[1] >= 2
    _assert_same(a, b, exact=True, members=[0, 2, 3])
    # frozen: finite parameters, no update applied after the non-finite step, flagged in the log
    d = int(b.diverged_step[1])
    assert all(np.isfinite(np.asarray(x)[1]).all() for x in jax.tree.leaves(b.params))
    assert np.all(b.metrics["update_norm"][d - 1:, 1] == 0) and np.all(b.metrics["diverged"][d - 1:, 1] == 1)
    assert np.all(b.metrics["diverged"][: d - 1, 1] == 0)


_TWO_DEVICES = textwrap.dedent("""
    import sys, numpy as np, jax
    sys.path.insert(0, sys.argv[1])
    from test_grpo_population import _cfg, _MEMBERS, _assert_same
    from grpojax.grpo import Member, train_population
    assert jax.device_count() == 2, jax.devices()
    members = [Member(**m) for m in _MEMBERS]   # groups of 1, 2 and 1 members on 2 devices: padded to 6 rows
    pop = train_population(_cfg(), members, None, chunk=4, show_progress=False)
    seq = train_population(_cfg(), members, None, chunk=4, show_progress=False, warm=pop.warm, batched=False,
                           devices=jax.devices()[:1])
    _assert_same(pop, seq, exact=False)
    print("OK", pop.metrics["loss"].shape, float(np.nanmax(pop.metrics["reward_std"])))
    """)


@pytest.mark.slow
def test_population_on_two_forced_cpu_devices_equals_sequential_runs(tmp_path):
    script = tmp_path / "two.py"
    script.write_text(_TWO_DEVICES)
    env = _clean_env(XLA_FLAGS="--xla_force_host_platform_device_count=2")
    done = _run([sys.executable, str(script), str(REPO / "tests")], 900, env=env, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "OK (6, 4)" in done.stdout


@pytest.mark.slow
def test_cli_train_population_writes_canonical_logs(tmp_path):
    from grpojax.logs import read_log

    spec = _write(tmp_path, f"""
        config: tiny-arith
        set: {json.dumps(_OVERRIDES + ["steps=3"])}
        chunk: 2
        defaults: {{momentum: 0.9}}
        grid:
          lr: [0.01, 0.05]
        """)
    out = tmp_path / "out"
    done = _run([*GRPOJAX, "train", "--population", str(spec), "--out", str(out), "--quiet"], 900,
                env=_clean_env(), cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:]
    table = json.loads((out / "population.json").read_text())
    assert [m["member"]["lr"] for m in table["members"]] == [0.01, 0.05]
    for m in table["members"]:
        log = read_log(m["log"])
        assert list(log.steps[-3:]) == [1, 2, 3]
        assert log.meta.get("k_ref") == 1 and log.meta.get("mu") == 0.9
        assert "reward_mean" in log.columns or "reward_mean" in getattr(log, "metrics", {})
    # the population is a learning-rate sweep advise reads: each member's lr and whether it diverged
    from grpojax.monitor import read_escape_sweep

    eta, escaped = read_escape_sweep(out / "population.json", steps=3)
    assert eta.tolist() == [0.01, 0.05] and escaped.tolist() == [m["diverged"] for m in table["members"]]


def test_the_population_files_of_the_docs_load(tmp_path):
    """The population file of the training guide and the example in the reader's docstring load as written."""
    import re

    from grpojax.grpo import _population_spec
    from grpojax.grpo._population_spec import load_population_spec

    guide = (REPO / "docs" / "guide" / "training.md").read_text()
    text = re.search(r"cat > population\.yaml <<'YAML'\n(.*?)\nYAML\n", guide, re.S).group(1)
    spec, cfg, buckets = load_population_spec(_write(tmp_path, text))
    assert cfg.steps == 200 and cfg.eval.every == 50 and spec.optimizer == "sgd"
    (g, members), = buckets
    assert g == 8 and len(members) == 12 and all(m.momentum == 0.9 for m in members)
    assert [m.name for m in members][:2] == ["m0000", "m0001"] and members[3].lr == 0.01 and members[3].k_ref == 4
    doc = _population_spec.__doc__
    example = textwrap.dedent(doc[doc.index("Example::") + len("Example::"):doc.index("Member fields")])
    spec, cfg, buckets = load_population_spec(_write(tmp_path, example))
    (_, members), = buckets
    assert members[0].name == "base" and len(members) == 1 + 3 * 2 * 2 and spec.chunk == 10
