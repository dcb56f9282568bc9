"""grpojax: GRPO training dynamics as a stochastically forced damped oscillator, in JAX.

Subpackages (import what you need; nothing heavy is imported here):

- :mod:`grpojax.dynamics` -- closed forms, reward-curve laws, exact discrete stability
- :mod:`grpojax.sde` -- diffrax integration and the exact linear-SDE transition
- :mod:`grpojax.bandit` -- softmax-bandit GRPO and its exact mean field
- :mod:`grpojax.sweep` -- vmapped, sharded sweeps and phase diagrams
- :mod:`grpojax.fit` -- least squares, numpyro posteriors, forecasts
- :mod:`grpojax.logs` -- readers into the canonical run log
- :mod:`grpojax.diagnose` -- failure-mode detectors
- :mod:`grpojax.lm` -- Flax NNX causal LM, Hugging Face weights, tokenizers, sampler
- :mod:`grpojax.grpo` -- the GRPO trainer: loss, advantages, rewards, data, checkpoints, run log
- :mod:`grpojax.plot` -- matplotlib figures

Errors: everything grpojax raises on purpose derives from :class:`GrpojaxError`; :class:`UserError`
(with :class:`InvalidValueError`, :class:`DataError`, :class:`ConfigError`) is something the caller can
fix, :class:`StorageError` a write the environment refused.
"""

from grpojax._errors import ConfigError, DataError, GrpojaxError, InvalidValueError, StorageError, UserError

__version__ = "0.1.0"
__all__ = ["ConfigError", "DataError", "GrpojaxError", "InvalidValueError", "StorageError", "UserError", "__version__"]
