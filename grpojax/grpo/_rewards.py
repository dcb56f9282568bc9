"""Verifiable math rewards: answer extraction, numeric equivalence, reward callables.

A reward function is a plain callable ``fn(completions, answers) -> np.ndarray`` (float32, one value
per completion). :func:`combine_rewards` sums several with weights; :func:`score_completions` runs a
set of them and also counts the completions whose answer could not be parsed (they score 0 under
:func:`correctness_reward`, and the trainer logs the count as ``unparsed``).

Answer formats (:data:`ANSWER_FORMATS`; the first format that matches wins, and inside a format the last
occurrence in the text):

* ``boxed``: ``\\boxed{...}`` (MATH style, nested braces handled),
* ``hash``: ``#### N`` (GSM8K style),
* ``answer_tag``: ``<answer>...</answer>``,
* ``answer_is``: ``answer is N`` / ``Answer: N``,
* ``last_number``: the last number in the text (``4 + 4 = 8`` -> ``8``; a ``-`` with a space after it
  is an operator, not a sign).

Which formats are tried, and in what order, is a :class:`ParseOptions` (frozen, hashable; the default
``boxed, hash, answer_is`` without fallback is the historical behaviour). ``fallback_last_number=True``
appends ``last_number``. :func:`format_reward` counts only the explicit markers of the options.

Numeric equivalence parses both sides to exact :class:`fractions.Fraction`: thousands separators
(``1,234``), signs, decimals (``0.50 == 1/2``), simple fractions and ``\\frac{a}{b}``, percentages,
currency and trailing units (``$12``, ``12 dollars``, ``12 cm``). Non-numeric answers fall back to a
normalised string comparison.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, Literal, NamedTuple

import numpy as np
from pydantic import field_serializer, field_validator

from grpojax._config import Bool, Config
from grpojax._errors import InvalidValueError

__all__ = [
    "ANSWER_FORMATS",
    "ParseOptions",
    "RewardFn",
    "Scored",
    "answers_equal",
    "combine_rewards",
    "correctness_reward",
    "extract_answer",
    "extract_boxed",
    "format_reward",
    "parse_number",
    "score_completions",
]

RewardFn = Callable[[Sequence[str], Sequence[str]], np.ndarray]

_NUM = r"[-+−]?\$?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?|[-+−]?\.\d+"
_HASH_RE = re.compile(r"####\s*([^\n]*)")
_ANSWER_IS_RE = re.compile(r"(?:answer\s*(?:is|:|=)\s*)([^\n]*)", re.IGNORECASE)
_NUM_RE = re.compile(_NUM)
_TAG_RE = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.IGNORECASE | re.DOTALL)
# a number as the last word of a working: a sign only when attached to the digits and not after a word
_LAST_NUM_RE = re.compile(r"(?<![\w.])(?:[-−](?=\d))?\$?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+)?")

#: the answer formats :class:`ParseOptions` can name
ANSWER_FORMATS = ("boxed", "hash", "answer_tag", "answer_is", "last_number")


class ParseOptions(Config):
    """How a completion's final answer is found (a :class:`grpojax._config.Config`: frozen, hashable,
    validated; the trainer's ``rewards.parse`` section).

    Attributes:
      formats: the answer formats to try, in order (names from :data:`ANSWER_FORMATS`; one name alone is
        read as a list of one).
      fallback_last_number: when no format matches, take the last number in the text (the same as
        appending ``"last_number"`` to ``formats``).

    Raises:
      ConfigError: an unknown or repeated format, no format at all, or an unknown key (named).
    """

    formats: tuple[Literal[ANSWER_FORMATS], ...] = ("boxed", "hash", "answer_is")
    fallback_last_number: Bool = False

    def __init__(self, formats: Sequence[str] | str = ("boxed", "hash", "answer_is"),
                 fallback_last_number: bool = False, **data: Any) -> None:
        super().__init__(formats=formats, fallback_last_number=fallback_last_number, **data)

    @field_validator("formats", mode="before")
    @classmethod
    def _one_name_is_a_list(cls, v: Any) -> Any:
        return (v,) if isinstance(v, str) else v

    @field_validator("formats")
    @classmethod
    def _distinct_and_not_empty(cls, v: tuple) -> tuple:
        if not v:
            raise ValueError("expected at least one of " + ", ".join(ANSWER_FORMATS))
        if len(set(v)) != len(v):
            raise ValueError("a format repeats; expected each at most once")
        return v

    @field_serializer("formats")
    def _as_list(self, v: tuple) -> list:
        return list(v)  # YAML and JSON store a list

    @property
    def order(self) -> tuple[str, ...]:
        """The formats actually tried, in order (``last_number`` appended by the fallback)."""
        if self.fallback_last_number and "last_number" not in self.formats:
            return self.formats + ("last_number",)
        return self.formats

    @property
    def markers(self) -> "ParseOptions":
        """The same options without ``last_number`` (what :func:`format_reward` accepts as a stated answer)."""
        explicit = tuple(f for f in self.formats if f != "last_number") or ("boxed", "hash", "answer_is")
        return ParseOptions(explicit, False)


DEFAULT_PARSING = ParseOptions()
_UNIT_WORDS = re.compile(
    r"(?:dollars?|cents?|euros?|pounds?|units?|apples?|items?|cm|mm|km|m|kg|g|hours?|minutes?|"
    r"seconds?|days?|years?|miles?|meters?|metres?|feet|inches?|degrees?|\^\\circ|\\circ|°)\b\.?$",
    re.IGNORECASE,
)


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, braces balanced."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip()
    return None  # unbalanced


def _first_number(s: str) -> str | None:
    m = _NUM_RE.search(s)
    return m.group(0).strip() if m else None


def _from_marker(cand: str) -> str | None:
    cand = cand.strip()
    num = _first_number(cand)
    return num if num is not None else (cand or None)


def _last_number(text: str) -> str | None:
    nums = _LAST_NUM_RE.findall(text)
    return nums[-1].strip() if nums else None


def _answer_tag(text: str) -> str | None:
    found = _TAG_RE.findall(text)
    if not found:
        return None
    inner = found[-1].strip()
    if parse_number(inner) is not None:
        return inner
    boxed = extract_boxed(inner)
    if boxed:
        return boxed
    if not re.search(r"\s", inner):  # one expression (``x+1``): the answer as written
        return inner or None
    return _from_marker(inner)  # a sentence: its first number


def _extract_one(text: str, fmt: str) -> str | None:
    if fmt == "boxed":
        boxed = extract_boxed(text)
        return boxed if boxed else None
    if fmt == "hash":
        hashes = _HASH_RE.findall(text)
        return _from_marker(hashes[-1]) if hashes else None
    if fmt == "answer_tag":
        return _answer_tag(text)
    if fmt == "answer_is":
        found = _ANSWER_IS_RE.findall(text)
        return _first_number(found[-1]) if found else None
    return _last_number(text)


def extract_answer(
    text: str, *, fallback_last_number: bool = False, options: ParseOptions | None = None
) -> str | None:
    """The final answer stated in a completion, or ``None`` when there is none.

    Args:
      text: a model completion (or a reference solution).
      fallback_last_number: when no explicit marker is present, take the last number in the text.
      options: which answer formats to try and in what order (default :class:`ParseOptions`);
        ``fallback_last_number=True`` adds the fallback to them.

    Returns:
      The answer string (not yet normalised), or ``None`` if unparseable.
    """
    opts = DEFAULT_PARSING if options is None else options
    order = opts.order
    if fallback_last_number and "last_number" not in order:
        order = order + ("last_number",)
    for fmt in order:
        got = _extract_one(text, fmt)
        if got is not None:
            return got
    return None


def parse_number(s: str) -> Fraction | None:
    """Parse a numeric answer exactly; ``None`` if ``s`` is not a number.

    Accepts ``-1,234.50``, ``+3``, ``−2`` (unicode minus), ``$12``, ``12 dollars``, ``45%`` (-> 0.45),
    ``3/4``, ``\\frac{3}{4}``, ``\\dfrac34``-style braces, ``2\\frac{1}{2}`` is *not* accepted
    (ambiguous), ``1e3``.
    """
    if s is None:
        return None
    t = s.strip().rstrip(".").strip()
    t = t.replace("−", "-").replace("\\!", "").replace("\\,", "").replace("\\ ", "")
    t = re.sub(r"\\text\{([^}]*)\}", r"\1", t)
    t = re.sub(r"\\(?:mathrm|textbf|mathbf)\{([^}]*)\}", r"\1", t)
    t = t.replace("\\$", "$").replace("\\%", "%").strip()
    percent = t.endswith("%")
    t = t.rstrip("%").strip()
    t = _UNIT_WORDS.sub("", t).strip()
    t = t.replace("$", "").strip()
    m = re.fullmatch(r"([-+]?)\s*\\d?frac\s*\{\s*([-+]?\d+)\s*\}\s*\{\s*([-+]?\d+)\s*\}", t)
    if m:
        num, den = int(m.group(2)), int(m.group(3))
        if den == 0:
            return None
        val = Fraction(num, den) * (-1 if m.group(1) == "-" else 1)
        return val / 100 if percent else val
    t = t.replace(" ", "")
    if re.fullmatch(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|[-+]?\.\d+", t):
        val = Fraction(t.replace(",", ""))
    elif re.fullmatch(r"[-+]?\d+(?:\.\d+)?[eE][-+]?\d+", t):
        val = Fraction(t)
    elif re.fullmatch(r"[-+]?\d+/\d+", t):
        num, den = t.split("/")
        if int(den) == 0:
            return None
        val = Fraction(int(num), int(den))
    else:
        return None
    return val / 100 if percent else val


def _norm_str(s: str) -> str:
    s = re.sub(r"\\text\{([^}]*)\}", r"\1", s)
    s = s.replace("\\left", "").replace("\\right", "").replace("$", "")
    return re.sub(r"\s+", "", s).strip(".").lower()


def answers_equal(pred: str | None, ref: str | None) -> bool:
    """Whether a predicted answer equals the reference (exact numeric, else normalised string)."""
    if pred is None or ref is None:
        return False
    a, b = parse_number(pred), parse_number(ref)
    if a is not None and b is not None:
        return a == b
    if (a is None) != (b is None):
        return False
    return _norm_str(pred) == _norm_str(ref) and _norm_str(pred) != ""


def reference_answer(answer: str) -> str:
    """The final answer of a reference solution (GSM8K ``#### N``, MATH ``\\boxed{}``, or bare)."""
    got = extract_answer(answer)
    return got if got is not None else answer.strip()


def correctness_reward(
    completions: Sequence[str],
    answers: Sequence[str],
    *,
    fallback_last_number: bool = False,
    options: ParseOptions | None = None,
) -> np.ndarray:
    """1.0 where the extracted answer equals the reference, else 0.0 (unparseable scores 0).

    Args:
      completions: ``n`` completion strings.
      answers: ``n`` reference answers (bare, ``#### N`` or ``\\boxed{}``).
      fallback_last_number: see :func:`extract_answer`.
      options: the answer formats of the completions (see :class:`ParseOptions`).

    Returns:
      ``(n,)`` float32 rewards in {0, 1}.
    """
    if len(completions) != len(answers):
        raise InvalidValueError(
            f"correctness_reward: got {len(completions)} completions but {len(answers)} answers; "
            "expected one answer per completion"
        )
    out = np.zeros(len(completions), np.float32)
    for i, (c, a) in enumerate(zip(completions, answers)):
        pred = extract_answer(c, fallback_last_number=fallback_last_number, options=options)
        out[i] = float(answers_equal(pred, reference_answer(a)))
    return out


def format_reward(
    completions: Sequence[str], answers: Sequence[str] | None = None, *, options: ParseOptions | None = None
) -> np.ndarray:
    """1.0 where the completion states a parseable final answer with an explicit marker, else 0.0.

    The markers are the formats of ``options`` other than ``last_number`` (a bare number is no format).
    """
    markers = (DEFAULT_PARSING if options is None else options).markers
    return np.array([float(extract_answer(c, options=markers) is not None) for c in completions], np.float32)


def combine_rewards(fns: Sequence[RewardFn], weights: Sequence[float] | None = None) -> RewardFn:
    """A reward callable returning ``sum_i w_i fn_i(completions, answers)``.

    Raises:
      ValueError: if the number of weights differs from the number of functions or a weight is
        not finite.
    """
    fns = list(fns)
    w = [1.0] * len(fns) if weights is None else [float(x) for x in weights]
    if len(w) != len(fns) or not fns:
        raise InvalidValueError(f"combine_rewards: {len(fns)} functions but {len(w)} weights; expected equal, >= 1")
    if not all(np.isfinite(w)):
        raise InvalidValueError(f"combine_rewards: weights must be finite, got {w}")

    def combined(completions: Sequence[str], answers: Sequence[str]) -> np.ndarray:
        total = np.zeros(len(completions), np.float32)
        for wi, fn in zip(w, fns):
            total += np.float32(wi) * np.asarray(fn(completions, answers), np.float32)
        return total

    return combined


REWARD_FUNCTIONS: dict[str, RewardFn] = {
    "correctness": correctness_reward,
    "format": format_reward,
}


class Scored(NamedTuple):
    """Rewards of a batch of completions.

    Attributes:
      rewards: ``(n,)`` float32 weighted total.
      correct: ``(n,)`` float32 correctness in {0, 1} (accuracy, independent of the weights).
      components: name -> ``(n,)`` per-function rewards (unweighted).
      unparsed: number of completions with no extractable answer.
    """

    rewards: np.ndarray
    correct: np.ndarray
    components: dict
    unparsed: int


#: reward functions that take the answer parsing options
_PARSING_AWARE = ("correctness", "format")


def score_completions(
    completions: Sequence[str],
    answers: Sequence[str],
    weights: dict[str, float],
    *,
    options: ParseOptions | None = None,
) -> Scored:
    """Score completions with named reward functions (see ``REWARD_FUNCTIONS``) and weights.

    Args:
      completions, answers: one reference answer per completion.
      weights: reward function name -> weight.
      options: the answer formats (see :class:`ParseOptions`), used by ``correctness``, ``format`` and the
        ``unparsed`` count.
    """
    unknown = sorted(set(weights) - set(REWARD_FUNCTIONS))
    if unknown:
        raise InvalidValueError(f"unknown reward function(s) {unknown}; expected some of {sorted(REWARD_FUNCTIONS)}")

    def fn(name):
        f = REWARD_FUNCTIONS[name]
        return functools.partial(f, options=options) if options is not None and name in _PARSING_AWARE else f

    comps = {name: np.asarray(fn(name)(completions, answers), np.float32) for name in weights}
    total = np.zeros(len(completions), np.float32)
    for name, w in weights.items():
        total += np.float32(w) * comps[name]
    correct = comps["correctness"] if "correctness" in comps else fn("correctness")(completions, answers)
    unparsed = int(sum(extract_answer(c, options=options) is None for c in completions))
    return Scored(total, correct, comps, unparsed)
