"""An offline generator of arithmetic word problems with a difficulty knob.

Each problem is a short story of ``n_steps`` additions/subtractions (and, from difficulty 4, a
doubling) on counts below ``max_value``; the worked solution is one equation per step and a GSM8K
``#### N`` line, e.g.::

    Ann has 12 pens. She buys 7 more. She gives away 5. How many pens now?
    12+7=19
    19-5=14
    #### 14

``difficulty`` -> ``(n_steps, max_value)``: 1 -> (1, 10), 2 -> (1, 20), 3 -> (2, 20), 4 -> (2, 50),
5 -> (3, 100). Intermediate values stay in ``[0, 2*max_value]``.
"""

from __future__ import annotations

import numpy as np

from grpojax._errors import InvalidValueError
from grpojax.grpo._data import Problem

__all__ = ["ARITH_DIFFICULTY", "arith_problems"]

ARITH_DIFFICULTY = {1: (1, 10), 2: (1, 20), 3: (2, 20), 4: (2, 50), 5: (3, 100)}
_NAMES = ("Ann", "Bob", "Cat", "Dan", "Eve", "Max", "Sam", "Zoe")
_PRON = {"Ann": "She", "Bob": "He", "Cat": "She", "Dan": "He", "Eve": "She", "Max": "He", "Sam": "He", "Zoe": "She"}
_ITEMS = ("pens", "cups", "eggs", "toys", "cards", "books")
_ADD = ("buys {b} more", "gets {b} more", "finds {b} more")
_SUB = ("gives away {b}", "loses {b}", "sells {b}")



def _one(rng: np.random.Generator, n_steps: int, max_value: int, allow_double: bool) -> Problem:
    name = _NAMES[rng.integers(len(_NAMES))]
    pron = _PRON[name]
    item = _ITEMS[rng.integers(len(_ITEMS))]
    x = int(rng.integers(1, max_value))
    parts = [f"{name} has {x} {item}."]
    lines = []
    for _ in range(n_steps):
        op = rng.integers(3 if allow_double else 2)
        if op == 2 and x <= max_value:
            parts.append(f"{pron} doubles them.")
            lines.append(f"{x}*2={2 * x}")
            x = 2 * x
        elif op == 1 and x >= 2:
            b = int(rng.integers(1, min(x, max_value)))
            parts.append(f"{pron} " + _SUB[rng.integers(len(_SUB))].format(b=b) + ".")
            lines.append(f"{x}-{b}={x - b}")
            x -= b
        else:
            b = int(rng.integers(1, max_value))
            parts.append(f"{pron} " + _ADD[rng.integers(len(_ADD))].format(b=b) + ".")
            lines.append(f"{x}+{b}={x + b}")
            x += b
    parts.append(f"How many {item} now?")
    solution = "\n".join(lines + [f"#### {x}"])
    return Problem(" ".join(parts), str(x), solution)


def arith_problems(n: int, *, difficulty: int = 2, seed: int = 0) -> list[Problem]:
    """``n`` arithmetic word problems (GSM8K-style worked solutions), deterministic in ``seed``.

    Args:
      n: number of problems.
      difficulty: 1..5, see the module docstring.
      seed: integer seed.

    Raises:
      ValueError: for an unknown difficulty or ``n < 1``.
    """
    if difficulty not in ARITH_DIFFICULTY:
        raise InvalidValueError(f"arith_problems: difficulty={difficulty!r}; expected one of {sorted(ARITH_DIFFICULTY)}")
    if n < 1:
        raise InvalidValueError(f"arith_problems: n={n}; expected n >= 1")
    n_steps, max_value = ARITH_DIFFICULTY[difficulty]
    rng = np.random.default_rng([int(seed), int(difficulty), 0xA817])
    return [_one(rng, n_steps, max_value, difficulty >= 4) for _ in range(n)]
