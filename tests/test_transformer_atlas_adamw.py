"""The AdamW cell of the transformer atlas (``experiments/transformer_atlas_adamw.py``): the gradient scale along
the stiffest direction that Adam's diagonal preconditioner applies, checked against optax's own Adam update."""

from __future__ import annotations

import jax
import numpy as np
import optax
import pytest

from tests._experiments import load_experiment

aw = load_experiment("transformer_atlas_adamw")


def test_harmonic_scale_is_adams_step_along_the_direction():
    """With optax's Adam at a settled second moment E[g_i²] (β₁ = 0, its bias correction undone), a gradient c·v
    moves the parameters along v by −lr c / sqrt(v₀) with sqrt(v₀) the harmonic scale; a coordinate axis as v gives
    that coordinate's RMS in both forms; the arithmetic form is the v²-weighted mean of E[g_i²]."""
    rng = np.random.default_rng(0)
    n = 200
    m2 = rng.lognormal(-6.0, 1.5, n)  # E[g_i²], spread over two orders of magnitude
    v = rng.standard_normal(n)
    v /= np.linalg.norm(v)
    harm, arith = aw.preconditioner_along(m2, v)

    lr, c, eps, b2, count = 0.01, 0.3, 1e-8, 0.999, 20_000
    g = c * v
    tx = optax.scale_by_adam(b1=0.0, b2=b2, eps=eps)
    state = tx.init(np.zeros(n, np.float32))
    nu0 = (m2 - (1.0 - b2) * g * g) / b2  # so that the updated second moment is E[g_i²] exactly
    state = state._replace(count=np.asarray(count, np.int32), nu=nu0.astype(np.float32))
    with jax.numpy_dtype_promotion("standard"):  # optax's bias correction mixes a float and the int32 count
        upd, new = tx.update(g.astype(np.float32), state)
    np.testing.assert_allclose(np.asarray(new.nu, np.float64), m2, rtol=1e-5)
    bias = np.sqrt(1.0 - b2 ** (count + 1))  # optax divides ν by 1 − β₂^t: undo it
    along = -lr * float(np.asarray(upd, np.float64) @ v) * bias
    assert along == pytest.approx(-lr * c / (harm + eps), rel=1e-4)
    assert arith == pytest.approx(float(np.sqrt(np.sum(v * v * m2))), rel=1e-12)
    assert harm < arith  # Jensen: the harmonic mean of sqrt(E) lies below the root mean square

    e = np.zeros(n)
    e[7] = 1.0
    h7, a7 = aw.preconditioner_along(m2, e)
    assert h7 == pytest.approx(np.sqrt(m2[7]), rel=1e-6) and a7 == pytest.approx(np.sqrt(m2[7]), rel=1e-12)


def test_bad_second_moment_is_refused():
    with pytest.raises(ValueError, match="second_moment"):
        aw.preconditioner_along(np.array([1.0, -1.0]), np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="shape"):
        aw.preconditioner_along(np.ones(3), np.ones(2))
