"""Reward-curve laws behind one interface (``docs/model/laws.md``).

Each law is an ``eqx.Module`` whose fields are its parameters (scalars or batched arrays), evaluated by
the one definition of the laws in :mod:`grpojax._curve_laws` (shared with the NumPy fits), with

- ``law(t)``: the curve at steps ``t`` (broadcast; differentiable; vmappable);
- ``param_names`` and ``bounds`` (class attributes): names and (lower, upper) limits used for fitting;
- ``to_unconstrained()`` / ``from_unconstrained(u)``: a bijection onto R^k through the bounds
  (log for one-sided bounds, scaled logistic for two-sided ones, identity for none), so that an
  unconstrained optimizer or sampler can never leave the valid region;
- ``to_vector()`` / ``from_vector(v)``: the parameters stacked on the last axis, in ``param_names`` order.

Laws:
    exponential   R(t) = R∞ − (R∞ − R₀) e^{−t/T}
    three_phase   R(t) = R∞ − (R∞ − R₀) φ(t; ω₀, ζ),  φ the oscillator-from-rest response (zero slope at 0)
    sigmoid       R(t) = R₀ + (A − R₀) / (1 + (t_mid/t)^B)            (ScaleRL, Khatri et al. 2025)
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

from grpojax import _curve_laws as forms
from grpojax.dynamics._expm2 import expm2_coefficients


class RewardLaw(eqx.Module):
    """Base class: parameters are the dataclass fields, in ``param_names`` order."""

    param_names: ClassVar[tuple[str, ...]] = ()
    bounds: ClassVar[tuple[tuple[float, float], ...]] = ()
    name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.name:  # names and bounds from the one definition of the laws
            cls.param_names, cls.bounds = forms.PARAMS[cls.name], forms.BOUNDS[cls.name]

    def __init__(self, *params, **named):
        """The parameters in ``param_names`` order, by position or by name (scalars or arrays)."""
        values = dict(zip(self.param_names, params), **named)
        if len(params) > len(self.param_names) or set(values) != set(self.param_names):
            raise TypeError(f"{type(self).__name__} takes the parameters {', '.join(self.param_names)}")
        for n in self.param_names:
            setattr(self, n, jnp.asarray(values[n]))

    def to_vector(self) -> Array:
        """Parameters stacked on the last axis, shape ``(..., k)``."""
        return jnp.stack(jnp.broadcast_arrays(*(getattr(self, n) * 1.0 for n in self.param_names)), axis=-1)

    @classmethod
    def from_vector(cls, v: ArrayLike):
        v = jnp.asarray(v)
        return cls(*(v[..., i] for i in range(len(cls.param_names))))

    def to_unconstrained(self) -> Array:
        return forms.to_unconstrained(self.name, self.to_vector(), jnp)

    @classmethod
    def from_unconstrained(cls, u: ArrayLike):
        return cls.from_vector(forms.from_unconstrained(cls.name, jnp.asarray(u), jnp))

    def __call__(self, t: ArrayLike) -> Array:
        """The law at steps ``t`` (broadcast; differentiable; vmappable): :mod:`grpojax._curve_laws`."""
        return forms.law_value(self.name, [getattr(self, n) for n in self.param_names], jnp.asarray(t), jnp,
                               expm2_coefficients)

    @property
    def num_params(self) -> int:
        return len(self.param_names)


class Exponential(RewardLaw):
    """R(t) = R∞ − (R∞ − R₀) e^{−t/T} (the saturation law; the M → 0 limit of the oscillator)."""

    r0: Array
    r_inf: Array
    T: Array
    name: ClassVar[str] = "exponential"


class ThreePhase(RewardLaw):
    """R(t) = R∞ − (R∞ − R₀) φ(t; ω₀, ζ): slow start (zero initial slope), rise, plateau.

    φ solves φ'' + 2ζω₀ φ' + ω₀² φ = 0 from rest (φ(0) = 1, φ'(0) = 0); ω₀² = K_eff/M and 2ζω₀ = C/M.
    ζ < 0 (negative damping) is allowed so that an unstable run can be represented.
    """

    r0: Array
    r_inf: Array
    omega0: Array
    zeta: Array
    name: ClassVar[str] = "three_phase"

    def response(self, t: ArrayLike) -> Array:
        """φ(t) from rest."""
        return forms.response(self.omega0, self.zeta, jnp.asarray(t), jnp, expm2_coefficients)


class Sigmoid(RewardLaw):
    """R(t) = R₀ + (A − R₀) / (1 + (t_mid/t)^B) for t > 0 (R₀ at t = 0); ScaleRL's compute law in steps."""

    r0: Array
    A: Array
    t_mid: Array
    B: Array
    name: ClassVar[str] = "sigmoid"


LAWS: dict[str, type[RewardLaw]] = {"exponential": Exponential, "three_phase": ThreePhase, "sigmoid": Sigmoid}
"""Registry of the reward-curve laws by name."""


def get_law(name: str) -> type[RewardLaw]:
    """Look a law up by name; ``ValueError`` listing the known names otherwise."""
    forms.law_params(name)  # the error names the known laws
    return LAWS[name]
