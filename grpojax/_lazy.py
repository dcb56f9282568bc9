"""Package names imported from their modules on first use (module ``__getattr__``, PEP 562).

A package ``__init__`` that imports every module it re-exports makes each caller pay for the heaviest of
them: ``grpojax.fit`` would import JAX and numpyro (seconds on two cores) for a command that needs one
NumPy forecast. A package lists its names instead::

    __getattr__, __dir__ = lazy_names(__name__, {"fit_law": "grpojax.fit._lsq", ...})

and imports the same names under ``if typing.TYPE_CHECKING:`` for readers, type checkers and the API
reference. A name's module is imported the first time the name is read; the value is then kept in the
package namespace, so later reads cost nothing. ``"name": "module:attribute"`` re-exports an attribute
under another name.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_names(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` that import ``names`` (``{name: "module[:attribute]"}``)."""
    table = dict(names)

    def __getattr__(name: str) -> object:
        try:
            where = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module, _, attribute = where.partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
