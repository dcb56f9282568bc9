"""Exact binomial count sampler whose cost does not grow with the number of trials.

A two-arm GRPO step only needs the number ``k`` of correct answers in a group of ``G``, so a step is one
draw ``k ~ Binomial(G, p)``. Two exact algorithms, chosen per element:

- **inversion** (sequential search of the CDF from ``k = 0``) when ``G·min(p, 1−p) < 10``: expected
  ``G·min(p, 1−p) + 1`` iterations, one uniform;
- **BTRS** (transformed rejection with squeeze, Hörmann 1993, "The generation of binomial random
  variates", J. Stat. Comput. Simul. 46) otherwise: acceptance ≥ ~0.8, the squeeze accepts most draws
  without evaluating a log-factorial, two uniforms per proposal.

Both use the symmetry ``Binomial(G, p) = G − Binomial(G, 1 − p)`` so that the working probability is
≤ 1/2. Each algorithm is a ``lax.while_loop`` that runs while *any* element is unfinished, so under
``vmap`` (or on a batch) the cost is the maximum, not the sum, over elements, and a batch whose elements
all use one algorithm never runs the other loop. :func:`binomial_counter` on a flat batch (the sweep's
hot loop) therefore runs the inversion and BTRS's retries on compacted subsets of the batch
(:func:`_drain`, :func:`_btrs_compact`), with the same draws. Its randomness is a Threefry-2x32 hash of
(step key, counter, draw) written in ``jax.numpy`` (:mod:`grpojax.bandit._threefry`) so that XLA fuses it.

Where the time goes at G = 1024 is measured by ``benchmarks/bandit_sampler_stages.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from grpojax.bandit._threefry import threefry2x32

__all__ = ["binomial", "binomial_counter", "COMPACT_MIN", "INVERSION_MAX_MEAN", "LOG_FACTORIAL_TABLE_MAX",
           "TABLE_MAX_N"]

INVERSION_MAX_MEAN = 10.0
"""Elements with ``G·min(p, 1−p)`` below this use CDF inversion, the others BTRS."""

TABLE_MAX_N = 64
"""With a static bound ``max_n ≤ TABLE_MAX_N`` the whole CDF is scanned without a loop (unrolled)."""

COMPACT_MIN = 256
""":func:`binomial_counter` on at least this many elements runs its loops on compacted subsets (same
draws as the plain loops, less work)."""


def _table_inversion(u: Array, n: Array, p: Array, max_n: int) -> Array:
    """Inversion by an unrolled scan of the CDF over k = 0..max_n (exact for n ≤ max_n, p ≤ 1/2).

    pmf(j+1) = pmf(j)·(p/(1−p))·(n − j)/(j + 1) is exactly 0 beyond j = n, so no mask is needed; the final
    clamp k ≤ n only guards against u above the rounded total CDF.
    """
    ratio = p / (1.0 - p)
    pmf = jnp.exp(n * jnp.log1p(-p))
    cdf = pmf
    k = (cdf < u).astype(p.dtype)
    for j in range(max_n - 1):
        pmf = pmf * ratio * (n - j) * (1.0 / (j + 1.0))
        cdf = cdf + pmf
        k = k + (cdf < u).astype(p.dtype)
    return jnp.minimum(k, n)


def _inversion(u: Array, n: Array, p: Array, active: Array) -> Array:
    """Smallest k with CDF(k) ≥ u by sequential search (p ≤ 1/2)."""
    q = 1.0 - p
    ratio = p / jnp.where(q > 0, q, 1.0)
    pmf0 = jnp.exp(n * jnp.log1p(-p))  # (1-p)^n, p ≤ 1/2 so no underflow for n·p < 10 regimes
    k0 = jnp.zeros_like(n)

    def cond(c):
        k, pmf, cdf, done = c
        return jnp.any(~done)

    def body(c):
        k, pmf, cdf, done = c
        go = ~done
        k_new = jnp.where(go, k + 1.0, k)
        pmf_new = jnp.where(go, pmf * ratio * (n - k) / (k + 1.0), pmf)
        cdf_new = jnp.where(go, cdf + pmf_new, cdf)
        done_new = done | (cdf_new >= u) | (k_new >= n)
        return k_new, pmf_new, cdf_new, done_new

    done0 = (~active) | (pmf0 >= u) | (n <= 0)
    return jax.lax.while_loop(cond, body, (k0, pmf0, pmf0, done0))[0]


_HALF_LN_2PI = 0.9189385332046727
# Stirling remainders log(k!) − [(k + ½) log k − k + ½ log 2π] for k = 0..15 (k = 0: log 0! − ½ log 2π)
_STIRLERR_TABLE = (
    0.0, 0.0810614667953273, 0.0413406959554093, 0.0276779256849983, 0.0207906721037651,
    0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720, 0.0092554621827127,
    0.0083305634333433, 0.0075736754879519, 0.0069428401072078, 0.0064089941880220, 0.0059513701127588,
    0.0055547335519628,
)


def _log_factorial(k: Array) -> Array:
    """log(k!) for integer-valued k ≥ 0 without lgamma: Stirling's form plus its remainder (table for
    k < 16, 4-term series above; absolute error < 1e-9)."""
    small = k < 16.0
    kk = jnp.maximum(k, 1.0)
    table = jnp.asarray(_STIRLERR_TABLE, dtype=k.dtype)
    idx = jnp.clip(k, 0.0, 15.0).astype(jnp.int32)
    ks = jnp.where(small, 16.0, kk)
    k2 = 1.0 / (ks * ks)
    series = (1.0 / 12.0 - k2 * (1.0 / 360.0 - k2 * (1.0 / 1260.0 - k2 / 1680.0))) / ks
    rem = jnp.where(small, table[idx], series)
    stirling = (kk + 0.5) * jnp.log(kk) - kk + _HALF_LN_2PI
    return jnp.where(k < 1.0, 0.0, stirling + rem)


LOG_FACTORIAL_TABLE_MAX = 1 << 16
"""With a static bound ``max_n`` up to this, log(k!) in BTRS's exact test is read from a table of
``max_n + 1`` values (computed in float64) instead of Stirling's series: ~30% less sampler time."""


def _log_factorial_fn(max_n: int | None, dtype):
    """log(k!) as a function of integer-valued k: a table lookup when a small static bound is known."""
    if max_n is None or int(max_n) > LOG_FACTORIAL_TABLE_MAX:
        return _log_factorial
    top = int(max_n)
    table = jnp.asarray(np.concatenate([[0.0], np.cumsum(np.log(np.arange(1.0, top + 1.0)))]), dtype=dtype)
    return lambda k: table[jnp.clip(k, 0.0, top).astype(jnp.int32)]


def _btrs_shape(n: Array, p: Array, active: Array):
    """BTRS constants needed by a proposal and its squeeze (cheap: one sqrt, two divisions)."""
    safe_n = jnp.where(active, n, 100.0)
    safe_p = jnp.where(active, p, 0.5)
    spq = jnp.sqrt(safe_n * safe_p * (1.0 - safe_p))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * safe_p
    c = safe_n * safe_p + 0.5
    v_r = 0.92 - 4.2 / b
    return safe_n, safe_p, spq, a, b, c, v_r


def _btrs_proposal(u, v, a, b, c, v_r, safe_n):
    """(candidate k, u shifted, |u| distance to the edge, k in [0, n], squeeze acceptance)."""
    u = u - 0.5
    us = 0.5 - jnp.abs(u)
    kk = jnp.floor((2.0 * a / us + b) * u + c)
    inside = (kk >= 0) & (kk <= safe_n)
    squeeze = (us >= 0.07) & (v <= v_r)
    return kk, us, inside, squeeze


def _btrs_consts(n: Array, p: Array, active: Array, lf=_log_factorial):
    """All per-element constants of BTRS (the squeeze's plus those of the exact acceptance test)."""
    safe_n, safe_p, spq, a, b, c, v_r = _btrs_shape(n, p, active)
    alpha = (2.83 + 5.1 / b) * spq
    lpq = jnp.log(safe_p / (1.0 - safe_p))
    m = jnp.floor((safe_n + 1.0) * safe_p)
    h = lf(m) + lf(safe_n - m)
    return safe_n, a, b, c, v_r, alpha, lpq, m, h


def _btrs_test(u: Array, v: Array, consts, lf=_log_factorial) -> tuple[Array, Array]:
    """(candidate k, accepted) for one BTRS proposal from the uniforms (u, v)."""
    safe_n, a, b, c, v_r, alpha, lpq, m, h = consts
    kk, us, inside, squeeze = _btrs_proposal(u, v, a, b, c, v_r, safe_n)
    lv = jnp.log(jnp.maximum(v, jnp.finfo(v.dtype).tiny) * alpha / (a / (us * us) + b))
    kc = jnp.clip(kk, 0.0, safe_n)
    lhs = h - lf(kc) - lf(safe_n - kc) + (kc - m) * lpq
    return kk, inside & (squeeze | (lv <= lhs))


def _btrs(uniforms, n: Array, p: Array, active: Array, lf=_log_factorial) -> Array:
    """BTRS rejection sampler (p ≤ 1/2, n·p ≥ 10 where active); proposal i uses ``uniforms(i)``, i ≥ 1."""
    consts = _btrs_consts(n, p, active, lf)

    def cond(c_):
        _, _, done = c_
        return jnp.any(~done)

    def body(c_):
        i, k, done = c_
        kk, accept = _btrs_test(*uniforms(i), consts, lf)
        take = (~done) & accept
        return i + 1, jnp.where(take, kk, k), done | accept

    _, k, _ = jax.lax.while_loop(cond, body, (jnp.int32(1), jnp.zeros_like(n), ~active))
    return k


_SCAN_BLOCK = 64


def _prefix_count(mask: Array) -> Array:
    """Inclusive prefix sum of a boolean vector as int32, in two levels of ``cumsum`` (within blocks of
    ``_SCAN_BLOCK``, then over block totals). On CPU this is ~3× cheaper than one ``cumsum`` over the
    vector and ~4× cheaper than ``lax.associative_scan``."""
    m = mask.shape[0]
    blocks = -(-m // _SCAN_BLOCK)
    x = jnp.pad(mask.astype(jnp.int32), (0, blocks * _SCAN_BLOCK - m)).reshape(blocks, _SCAN_BLOCK)
    within = jnp.cumsum(x, axis=1)
    totals = within[:, -1]
    return (within + (jnp.cumsum(totals) - totals)[:, None]).reshape(-1)[:m]


def _drain(pending: Array, cap: int, finish, out: Array, args: tuple[Array, ...]) -> Array:
    """Compute ``out`` for the pending entries of a flat batch on compacted buffers of static size ``cap``.

    The pending entries are gathered in order (prefix count + one scatter of their indices) into a
    buffer, ``finish(*buffer_args, valid)`` computes their values there, and those are scattered back;
    repeated while entries are left (when more than ``cap`` are pending). With none pending it costs one
    reduction.
    """
    m = pending.shape[0]
    cap = min(m, cap)

    def body(st):
        out, pending = st
        pos = _prefix_count(pending) - 1
        take = pending & (pos < cap)
        idx = jnp.full(cap, m, jnp.int32).at[jnp.where(take, pos, cap)].set(jnp.arange(m, dtype=jnp.int32),
                                                                             mode="drop")
        t = jnp.minimum(idx, m - 1)
        vals = finish(*(x[t] for x in args), idx < m)
        return out.at[idx].set(vals, mode="drop"), pending & ~take

    return jax.lax.while_loop(lambda st: jnp.any(st[1]), body, (out, pending))[0]


_LEVELS = ((2, 2), (16, 2))
"""Buffers of :func:`_btrs_compact`: (divisor of N, BTRS rounds run there) per level; below the last, a
``while_loop`` on a buffer of N/256 (at least 64) runs until every element is accepted."""


def _btrs_compact(bits, counter: Array, n: Array, p: Array, active: Array, lf=_log_factorial) -> Array:
    """:func:`_btrs` for a flat batch of N elements, with the rejection rounds run on compacted subsets.

    ``bits(i, counter)`` gives the uniforms of proposal ``i`` (``i`` may be an array). Every element's
    first proposal is tested with the squeeze alone (no logarithm), which accepts ~70% of them at
    G = 1024. The others are gathered (:func:`_drain`) into a buffer of N/2 where two full BTRS rounds
    run (the exact test of proposal 1, then proposal 2: ~2% of N left); those left go to a buffer of N/16
    for two more rounds, and the last few to a ``while_loop`` on a small buffer. Every element so accepts
    the first of *its* proposals that BTRS accepts, exactly as in :func:`_btrs` (tested for equality);
    only the work differs: a ``while_loop`` over the whole batch runs as many full-batch rounds as the
    slowest element needs (5–6 for 10⁴ elements).
    """
    N = n.shape[0]
    caps = [max(64, N // d) for d, _ in _LEVELS] + [max(64, N // 256)]
    rounds = [r for _, r in _LEVELS] + [None]

    def finish(level, cnt, nn, pp, nxt, pending):
        """BTRS from proposal ``nxt`` until every pending element of a buffer is accepted."""
        consts = _btrs_consts(nn, pp, pending, lf)
        k = jnp.zeros_like(nn)
        if rounds[level] is None:
            def body(st):
                k, pending, nxt = st
                kk, accept = _btrs_test(*bits(nxt, cnt), consts, lf)
                return jnp.where(pending & accept, kk, k), pending & ~accept, nxt + 1

            return jax.lax.while_loop(lambda st: jnp.any(st[1]), body, (k, pending, nxt))[0]
        for _ in range(rounds[level]):
            kk, accept = _btrs_test(*bits(nxt, cnt), consts, lf)
            k = jnp.where(pending & accept, kk, k)
            pending = pending & ~accept
            nxt = nxt + 1
        return _drain(pending, caps[level + 1], lambda *a: finish(level + 1, *a), k, (cnt, nn, pp, nxt))

    safe_n, _, _, a, b, c, v_r = _btrs_shape(n, p, active)
    kk, _, inside, squeeze = _btrs_proposal(*bits(1, counter), a, b, c, v_r, safe_n)
    first = inside & squeeze
    k0 = jnp.where(active & first, kk, jnp.zeros_like(n))

    def finish0(cnt, nn, pp, pending):  # the squeeze-rejected first proposal is re-tested in full
        return finish(0, cnt, nn, pp, jnp.ones(nn.shape, jnp.uint32), pending)

    return _drain(active & ~first, caps[0], finish0, k0, (counter, n, p))


def _bits_to_unit(bits: Array, dtype) -> Array:
    """uint32 → uniform in [0, 1) with 24 (float32) or 32 (float64) random bits."""
    if jnp.dtype(dtype) == jnp.float64:
        return bits.astype(dtype) * (2.0**-32)
    return (bits >> 8).astype(dtype) * (2.0**-24)


def _canonical(n: Array, p: Array):
    """(valid, n, flip, p ≤ 1/2): non-finite elements get n = 0 (so they never stall a loop)."""
    valid = jnp.isfinite(p) & jnp.isfinite(n) & (n >= 0)
    n = jnp.where(valid, n, 0.0)
    flip = p > 0.5
    pp = jnp.clip(jnp.where(valid, jnp.where(flip, 1.0 - p, p), 0.0), 0.0, 0.5)
    return valid, n, flip, pp


def _restore(k: Array, valid: Array, n: Array, flip: Array, pp: Array) -> Array:
    k = jnp.where(pp <= 0, 0.0, k)
    return jnp.where(valid, jnp.where(flip, n - k, k), jnp.nan)


def _sample(uniforms, n: Array, p: Array, max_n: int | None) -> Array:
    valid, n, flip, pp = _canonical(n, p)
    u = uniforms(0)[0]
    if max_n is not None and int(max_n) <= TABLE_MAX_N:  # one uniform, no loop
        k = _table_inversion(u, n, pp, int(max_n))
    else:
        small = n * pp < INVERSION_MAX_MEAN
        k_small = _inversion(u, n, pp, small)
        k_large = _btrs(uniforms, n, pp, ~small, _log_factorial_fn(max_n, p.dtype))
        k = jnp.where(small, k_small, k_large)
    return _restore(k, valid, n, flip, pp)


def _sample_flat(bits, counter: Array, n: Array, p: Array, max_n: int | None) -> Array:
    """:func:`_sample` for a flat batch: same draws, but the loops run on compacted buffers (:func:`_drain`)."""
    valid, n, flip, pp = _canonical(n, p)
    if max_n is not None and int(max_n) <= TABLE_MAX_N:
        k = _table_inversion(bits(0, counter)[0], n, pp, int(max_n))
    else:
        small = n * pp < INVERSION_MAX_MEAN
        k = _btrs_compact(bits, counter, n, pp, ~small, _log_factorial_fn(max_n, p.dtype))
        k = _drain(small, max(64, n.shape[0] // 2),
                   lambda cnt, nn, pq, act: _inversion(bits(0, cnt)[0], nn, pq, act), k, (counter, n, pp))
    return _restore(k, valid, n, flip, pp)


def _prepare(n, p):
    p = jnp.asarray(p)
    dtype = p.dtype if jnp.issubdtype(p.dtype, jnp.floating) else jnp.result_type(float)
    return jnp.broadcast_arrays(jnp.asarray(n, dtype=dtype), p.astype(dtype))


def binomial(key: Array, n: ArrayLike, p: ArrayLike, *, max_n: int | None = None) -> Array:
    """Exact draw of ``k ~ Binomial(n, p)`` elementwise, cost independent of ``n``.

    Args:
        key: a JAX PRNG key (one key for the whole broadcast array).
        n: number of trials (integer-valued, ≥ 0), any shape broadcastable with ``p``.
        p: success probability in [0, 1].
        max_n: optional static upper bound on ``n`` (every ``n`` must be ≤ it). When it is
            ≤ :data:`TABLE_MAX_N` the sampler is a loop-free unrolled CDF inversion (the fastest path for
            small groups); up to :data:`LOG_FACTORIAL_TABLE_MAX`, BTRS's exact test reads log k! from a
            table of ``max_n + 1`` values.

    Returns:
        NaN where ``n`` or ``p`` is not finite (so one diverged element cannot stall the batch); otherwise
        counts as floating values of the broadcast shape (``p``'s float dtype), ready to enter gradients.

    Example:
        >>> import jax
        >>> k = binomial(jax.random.key(0), 1000, 0.3)
        >>> 0 <= float(k) <= 1000
        True
    """
    n, p = _prepare(n, p)

    def uniforms(i):
        uv = jax.random.uniform(jax.random.fold_in(key, i), (2,) + n.shape, dtype=p.dtype)
        return uv[0], uv[1]

    return _sample(uniforms, n, p, max_n)


def binomial_counter(key: Array, counter: ArrayLike, n: ArrayLike, p: ArrayLike, *, max_n: int | None = None
                     ) -> Array:
    """:func:`binomial` whose randomness is ``threefry(key, counter)``: one hash per element and draw.

    The element with counter c gets the same draw whatever the shape, order, chunking or sharding of the
    batch (the sweep uses the global row id), and under ``vmap`` with an unbatched ``key`` each element
    costs a single Threefry-2x32 evaluation (two uniforms) per draw.

    Args:
        key: PRNG key shared by the batch (use a fresh one per step).
        counter: uint32 counter per element (e.g. the row id), broadcast with ``n``/``p``.
        n, p, max_n: as in :func:`binomial`.
    """
    n, p = _prepare(n, p)
    c = jnp.broadcast_to(jnp.asarray(counter, dtype=jnp.uint32), n.shape).ravel()

    kd = jax.random.key_data(key)
    if kd.shape != (2,):  # a non-threefry key: derive a threefry key pair from it
        kd = jax.random.bits(key, (2,), jnp.uint32)

    def bits(i, cc):
        """Uniforms (u, v) of draw i for counters cc: threefry_2x32(key, (counter, i)), one hash each."""
        w0, w1 = threefry2x32(kd[0], kd[1], cc, jnp.broadcast_to(jnp.asarray(i, jnp.uint32), cc.shape))
        return _bits_to_unit(w0, p.dtype), _bits_to_unit(w1, p.dtype)

    def uniforms(i):
        u, v = bits(i, c)
        return u.reshape(n.shape), v.reshape(n.shape)

    if c.shape[0] < COMPACT_MIN:
        return _sample(uniforms, n, p, max_n)
    return _sample_flat(bits, c, n.ravel(), p.ravel(), max_n).reshape(n.shape)
