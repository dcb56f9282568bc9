"""CausalLM: config parsing, logits vs the transformers reference, KV cache, sharding on 2 host devices."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from grpojax.lm import (
    CausalLM,
    ModelConfig,
    init_cache,
    left_pad_positions,
    load_pretrained,
)
from grpojax.lm._rope import inverse_frequencies

FIX = pathlib.Path(__file__).parent / "fixtures" / "lm"
NAMES = ["qwen2", "llama"]


@pytest.fixture(scope="session", params=NAMES)
def fixture_model(request):
    d = FIX / request.param
    return request.param, load_pretrained(d), dict(np.load(d / "reference.npz"))


@jax.jit
def _forward(graphdef_state, tokens, positions, mask):
    return nnx.merge(*graphdef_state)(tokens, positions, attention_mask=mask)[0]


def test_config_from_hf_fields():
    q = ModelConfig.from_hf(FIX / "qwen2")
    assert q.model_type == "qwen2" and q.attention_bias and q.tie_word_embeddings and q.rope_scaling is None
    assert (q.head_dim, q.num_key_value_heads, q.num_groups) == (16, 2, 2)
    lm = ModelConfig.from_hf(FIX / "llama")
    assert lm.rope_type == "llama3" and not lm.attention_bias and not lm.tie_word_embeddings
    assert lm.rope_theta == 500000.0 and lm.rms_norm_eps == 1e-5
    raw = json.loads((FIX / "llama" / "config.json").read_text())
    assert "rope_parameters" in raw  # transformers 5 layout; the classic layout must parse identically
    classic = {k: v for k, v in raw.items() if k != "rope_parameters"}
    rp = dict(raw["rope_parameters"])
    classic["rope_theta"] = rp.pop("rope_theta")
    classic["rope_scaling"] = rp
    assert ModelConfig.from_hf(classic) == lm
    for cfg in (q, lm):  # to_hf -> from_hf is the identity, and the config is hashable (jit static arg)
        assert ModelConfig.from_hf(cfg.to_hf()) == cfg
        assert hash(ModelConfig.from_hf(cfg.to_hf())) == hash(cfg)


def test_config_rejects_bad_values():
    base = json.loads((FIX / "qwen2" / "config.json").read_text())
    with pytest.raises(ValueError, match="model_type='gpt2'"):
        ModelConfig.from_hf({**base, "model_type": "gpt2"})
    with pytest.raises(ValueError, match="num_key_value_heads=3"):
        ModelConfig.from_hf({**base, "num_key_value_heads": 3})
    with pytest.raises(ValueError, match="yarn"):
        ModelConfig.from_hf({**base, "rope_scaling": {"rope_type": "yarn", "factor": 2.0}})
    with pytest.raises(ValueError, match="intermediate_size"):
        ModelConfig.from_hf({k: v for k, v in base.items() if k != "intermediate_size"})


def test_llama3_rope_frequencies_closed_form():
    """Llama-3 rule checked pointwise: high frequencies kept, low ones divided by factor, smooth in between."""
    cfg = ModelConfig.from_hf(FIX / "llama")
    sc = cfg.rope_scaling
    base = 1.0 / cfg.rope_theta ** (np.arange(0, cfg.head_dim, 2) / cfg.head_dim)
    got = inverse_frequencies(cfg)
    ctx, lo, hi, fac = sc["original_max_position_embeddings"], sc["low_freq_factor"], sc["high_freq_factor"], sc["factor"]
    for f, g in zip(base, got):
        wl = 2 * np.pi / f
        if wl < ctx / hi:
            want = f
        elif wl > ctx / lo:
            want = f / fac
        else:
            s = (ctx / wl - lo) / (hi - lo)
            want = (1 - s) * f / fac + s * f
        np.testing.assert_allclose(g, want, rtol=1e-6)
    kinds = {(wl < ctx / hi, wl > ctx / lo) for wl in 2 * np.pi / base}
    assert len(kinds) >= 2  # the fixture exercises more than one branch


def test_logits_match_transformers_reference(fixture_model):
    """fp32 logits on a left-padded batch == transformers (eager attention) within 1e-4 at real tokens."""
    name, model, ref = fixture_model
    assert (~ref["mask"]).any(), "reference batch must contain padding"
    logits = _forward(nnx.split(model), ref["tokens"], ref["positions"], ref["mask"])
    assert logits.dtype == jnp.float32 and logits.shape == ref["logits"].shape
    err = np.abs(np.asarray(logits) - ref["logits"])[ref["mask"]]
    assert err.max() < 1e-4, (name, err.max())


def test_kv_cache_chunks_equal_full_forward():
    """Prefill 5 tokens, then chunks of 1 and 3 through the cache == one full causal forward."""
    model = load_pretrained(FIX / "qwen2")
    ref = dict(np.load(FIX / "qwen2" / "reference.npz"))
    tokens, mask, pos = ref["tokens"], ref["mask"], ref["positions"]
    B, T = tokens.shape

    @jax.jit
    def chunked(gs, tokens, pos, mask):
        m = nnx.merge(*gs)
        cache = init_cache(m.config, B, T + 2, dtype=jnp.float32)
        outs = []
        for a, b in ((0, 5), (5, 6), (6, T)):
            lg, cache = m(tokens[:, a:b], pos[:, a:b], attention_mask=mask[:, a:b], cache=cache)
            outs.append(lg)
        return jnp.concatenate(outs, axis=1), cache.end

    got, end = chunked(nnx.split(model), tokens, pos, mask)
    full = _forward(nnx.split(model), tokens, pos, mask)
    assert int(end) == T
    np.testing.assert_allclose(np.asarray(got)[mask], np.asarray(full)[mask], atol=1e-5)


def test_padding_invariance_and_bf16():
    """Extra left padding leaves real-token logits unchanged; bf16 compute stays close to fp32."""
    model = load_pretrained(FIX / "llama")
    cfg = model.config
    tokens = jax.random.randint(jax.random.key(0), (2, 6), 3, cfg.vocab_size, dtype=jnp.int32)
    mask = jnp.ones((2, 6), bool)
    padded = jnp.concatenate([jnp.zeros((2, 4), jnp.int32), tokens], axis=1)
    pmask = jnp.concatenate([jnp.zeros((2, 4), bool), mask], axis=1)
    a = _forward(nnx.split(model), tokens, left_pad_positions(mask), mask)
    b = _forward(nnx.split(model), padded, left_pad_positions(pmask), pmask)
    np.testing.assert_allclose(np.asarray(b)[:, 4:], np.asarray(a), atol=1e-5)
    bf = load_pretrained(FIX / "llama", dtype=jnp.bfloat16)
    assert bf.layers[0].mlp.up_proj.kernel[...].dtype == jnp.bfloat16
    c = _forward(nnx.split(bf), tokens, left_pad_positions(mask), mask)
    assert c.dtype == jnp.float32
    err = np.abs(np.asarray(c) - np.asarray(a)).max()
    assert 0 < err < 0.05 * np.abs(np.asarray(a)).max() + 0.05, err


def test_bad_inputs():
    cfg = ModelConfig.from_hf(FIX / "qwen2")
    model = nnx.eval_shape(lambda: CausalLM(cfg, rngs=nnx.Rngs(0)))
    tok = jnp.zeros((2, 3), jnp.int32)
    with pytest.raises(ValueError, match="positions"):
        model(tok, jnp.zeros((2, 4), jnp.int32))
    with pytest.raises(ValueError, match="attention_mask"):
        model(tok, jnp.zeros((2, 3), jnp.int32), attention_mask=jnp.ones((2, 4), bool))


_SHARDED_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    from flax import nnx
    from grpojax.lm import generate, load_pretrained, make_mesh
    assert len(jax.devices()) == 2, jax.devices()
    d = sys.argv[1]
    ref = dict(np.load(d + "/reference.npz"))
    fwd = jax.jit(lambda gs, t, p, m: nnx.merge(*gs)(t, p, attention_mask=m)[0])
    plain = load_pretrained(d)
    base = np.asarray(fwd(nnx.split(plain), ref["tokens"], ref["positions"], ref["mask"]))
    gen = lambda m: generate(m, ref["tokens"], ref["mask"], key=jax.random.key(0), max_new_tokens=6,
                             eos_id=plain.config.eos_token_id, temperature=1.0)
    g0 = gen(plain)
    out = {}
    for shape in ((1, 2), (2, 1)):
        mesh = make_mesh(*shape)
        model = load_pretrained(d, mesh=mesh)
        k = model.layers[0].mlp.gate_proj.kernel[...]
        lg = np.asarray(fwd(nnx.split(model), ref["tokens"], ref["positions"], ref["mask"]))
        out[str(shape)] = {"err": float(np.abs(lg - base)[ref["mask"]].max()),
                           "ndev": len(k.sharding.device_set), "spec": str(k.sharding.spec),
                           "shard_shape": list(k.addressable_shards[0].data.shape)}
        if shape == (1, 2):  # sampling on the tensor-parallel mesh: same tokens, same log-probs
            from grpojax.lm._sampler import _cache_sharding
            out["cache_spec"] = str(tuple(_cache_sharding(nnx.split(model)[1], (4, 8, 2, 16)).spec))
            g = gen(model)
            out["gen_same_tokens"] = bool((np.asarray(g.completion) == np.asarray(g0.completion)).all())
            out["gen_lp_err"] = float(np.abs(np.asarray(g.logprobs) - np.asarray(g0.logprobs)).max())
    print("RESULT" + json.dumps(out))
    """
)


@pytest.mark.parametrize("name", ["llama"])
def test_two_host_devices_sharded_equals_unsharded(name):
    """Subprocess with 2 forced host devices: meshes (data, model) = (1, 2) and (2, 1) give the same logits;
    sampling on the (1, 2) mesh gives the same tokens and log-probs as unsharded."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    res = subprocess.run([sys.executable, "-c", _SHARDED_SCRIPT, str(FIX / name)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.split("RESULT", 1)[1])
    assert out.pop("gen_same_tokens") and out.pop("gen_lp_err") < 1e-5
    assert out.pop("cache_spec") == "('data', None, 'model', None)"  # batch over data, KV heads over model
    for shape, r in out.items():
        assert r["ndev"] == 2, r
        assert r["err"] < 1e-5, (shape, r)
    # gate_proj kernel (64, 128) is annotated ('data', 'model'): split along one axis on each mesh
    assert out["(1, 2)"]["shard_shape"] == [64, 64] and out["(2, 1)"]["shard_shape"] == [32, 128]
