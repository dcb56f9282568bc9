"""A random instance of the noisy linearised update (K_0, K_d, step-noise covariance), shared by the tests of the
whole-displacement escape model."""

from __future__ import annotations

import numpy as np


def linear_instance(n: int = 4, seed: int = 0):
    """``(K_0, K_d, Σ_step)``: a stiff K_0 (eigenvalues 0.2-1 plus a small asymmetric part), a small K_d, and a
    full-rank noise covariance, all ``n × n``."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    k0 = Q @ np.diag(np.linspace(0.2, 1.0, n)) @ Q.T + 0.05 * rng.standard_normal((n, n))
    kd = 0.2 * rng.standard_normal((n, n))
    L = rng.standard_normal((n, n))
    cov = 0.1 * L @ L.T / n
    return k0, kd, cov
