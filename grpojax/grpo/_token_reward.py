"""The score piece inside a traced program: GSM8K-style ``#### N`` correctness on token ids.

The trainer scores decoded text with :func:`grpojax.grpo.score_completions`. A population of policies
trained in one compiled program cannot leave it to decode, so this module scores the token ids directly
for a vocabulary in which ``####`` is one token and every digit is its own token (the word-level
tokenizer of the arithmetic task). It reproduces the text scorer's ``hash`` format for integer answers:

- special tokens (EOS, padding, unknown) are invisible, as in the decoded text;
- the answer follows the *last* match of ``####\\s*([^\\n]*)`` (a match runs to the end of its line, so
  a second ``####`` on the same line is part of the first match's text);
- in that line the first number ``[-+]?\\s*digits(.digits)?(\\s*/\\s*digits)?`` (or ``[-+]?.digits``)
  is read; it is correct when it equals the integer answer exactly (``8.0``, ``16/2``, ``-0`` = ``0``).

A completion without ``####`` scores 0 (the text scorer would try ``\\boxed{}`` and ``answer is``, which
this task's vocabulary cannot spell). Numbers with more than 9 significant digits score 0.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from grpojax._errors import ConfigError

__all__ = ["TokenClasses", "hash_answer_correct", "hash_answer_rewards", "token_classes"]

_MAX_DIGITS = 9


class TokenClasses(NamedTuple):
    """Per-token-id lookup tables (each ``(V,)``) and the ``####`` id.

    Attributes:
      digit: the digit value, -1 for a non-digit token.
      space: a token made of spaces / tabs only (no newline).
      newline: a token that contains a newline and only whitespace.
      special: invisible in decoded text (EOS, padding, unknown, ...).
      minus, plus, dot, slash: the one-character tokens ``-``, ``+``, ``.``, ``/``.
      hash_id: the id of ``####``.
    """

    digit: Array
    space: Array
    newline: Array
    special: Array
    minus: Array
    plus: Array
    dot: Array
    slash: Array
    hash_id: int


def token_classes(tokenizer) -> TokenClasses:
    """The lookup tables of a ``tokenizers.Tokenizer`` (e.g. :func:`grpojax.lm.word_tokenizer`).

    Raises:
      ConfigError: the vocabulary has no ``####`` token, or a token mixes digits with other characters
        (numbers would not be spelled digit by digit).
    """
    V = tokenizer.get_vocab_size(with_added_tokens=True)
    specials = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}
    digit = np.full(V, -1, np.int32)
    flags = {k: np.zeros(V, bool) for k in ("space", "newline", "special", "minus", "plus", "dot", "slash")}
    hash_id = None
    for i in range(V):
        s = tokenizer.id_to_token(i)
        if s is None:
            flags["special"][i] = True
            continue
        if s in specials:
            flags["special"][i] = True
        elif s == "####":
            hash_id = i
        elif len(s) == 1 and s.isdigit() and s.isascii():
            digit[i] = int(s)
        elif any(c.isdigit() for c in s):
            raise ConfigError(f"token {s!r} (id {i}) mixes digits with other characters; the in-program reward "
                              "needs one token per digit (tokenizer.kind: word)")
        elif s and s.strip() == "":
            flags["newline" if "\n" in s else "space"][i] = True
        elif s in ("-", "+", ".", "/"):
            flags[{"-": "minus", "+": "plus", ".": "dot", "/": "slash"}[s]][i] = True
    if hash_id is None:
        raise ConfigError("the tokenizer has no '####' token; the in-program reward needs one (tokenizer.kind: word)")
    return TokenClasses(jnp.asarray(digit), *(jnp.asarray(flags[k]) for k in
                        ("space", "newline", "special", "minus", "plus", "dot", "slash")), hash_id=int(hash_id))


def _first(cond: Array, idx: Array, n: int) -> Array:
    """Smallest index where ``cond`` holds (``n`` when none)."""
    return jnp.min(jnp.where(cond, idx, n))


def _number(dig: Array, start: Array, stop: Array, idx: Array) -> tuple[Array, Array]:
    """Integer value of the digits at ``[start, stop)`` and whether it has at most 9 significant digits."""
    inside = (idx >= start) & (idx < stop)
    nz = _first(inside & (dig > 0), idx, dig.shape[0])
    sig = jnp.maximum(stop - jnp.minimum(nz, stop), 0)
    power = jnp.clip(stop - 1 - idx, 0, _MAX_DIGITS)
    p10 = jnp.asarray([10**k for k in range(_MAX_DIGITS + 1)], jnp.int32)[power]
    use = inside & (idx >= nz)
    value = jnp.sum(jnp.where(use, jnp.maximum(dig, 0) * p10, 0), dtype=jnp.int32)
    return value, sig <= _MAX_DIGITS


def _row_correct(tok: Array, mask: Array, answer: Array, cls: TokenClasses) -> Array:
    n = tok.shape[0]
    idx = jnp.arange(n, dtype=jnp.int32)
    visible = mask & ~cls.special[tok]
    order = jnp.argsort(~visible, stable=True)  # visible tokens first, in order
    tok = tok[order]
    L = jnp.sum(visible, dtype=jnp.int32)
    vis = idx < L
    dig = jnp.where(vis, cls.digit[tok], -1)
    is_digit = dig >= 0
    space = vis & cls.space[tok]
    newline = vis & cls.newline[tok]
    is_hash = vis & (tok == cls.hash_id)

    # the last match of ``####\s*([^\n]*)``: free -> (####) skipping whitespace -> (non-space) in line -> (\n) free
    def scan_fn(carry, x):
        mode, last = carry
        j, h, ws, nl = x
        start = (mode == 0) & h
        to_line = (mode == 1) & ~ws
        to_free = (mode == 2) & nl
        mode = jnp.where(start, 1, jnp.where(to_line, 2, jnp.where(to_free, 0, mode)))
        return (mode, jnp.where(start, j, last)), None

    (_, h), _ = jax.lax.scan(scan_fn, (jnp.int32(0), jnp.int32(-1)), (idx, is_hash, space | newline, newline))
    s = _first((idx > h) & vis & ~space & ~newline, idx, n)  # the line's text starts here
    e = jnp.minimum(_first((idx >= s) & newline, idx, n), L)  # ... and ends before this newline
    line = (idx >= s) & (idx < e)
    d = _first(line & is_digit, idx, n)  # first digit of the line
    has = (h >= 0) & (d < e)
    at = lambda j: tok[jnp.clip(j, 0, n - 1)]  # noqa: E731
    in_line = lambda j: (j >= s) & (j < e)  # noqa: E731
    # a pure fraction ``[-+]?.digits`` when a dot sits right before the first digit
    pure_frac = in_line(d - 1) & cls.dot[at(d - 1)]
    # the sign: ``[-+]`` then spaces then the number (or directly before the dot of a pure fraction)
    b = jnp.where(pure_frac, d - 2, jnp.max(jnp.where((idx < d) & (idx >= s) & ~space, idx, -1)))
    negative = in_line(b) & cls.minus[at(b)]
    r = _first((idx >= d) & ~is_digit, idx, n)  # end of the first digit run
    r = jnp.minimum(r, e)
    run_val, run_ok = _number(dig, d, r, idx)
    run_nonzero = run_val != 0
    # ``.digits`` after an integer run
    frac = ~pure_frac & in_line(r) & cls.dot[at(r)] & in_line(r + 1) & (dig[jnp.clip(r + 1, 0, n - 1)] >= 0)
    f_end = jnp.minimum(_first((idx > r) & ~is_digit, idx, n), e)
    frac_nonzero = frac & jnp.any((idx > r) & (idx < f_end) & (dig > 0))
    q = jnp.where(frac, f_end, r)
    # ``\s*/\s*digits`` after the integer (and fractional) part
    p = _first((idx >= q) & ~space, idx, n)
    slash = ~pure_frac & in_line(p) & cls.slash[at(p)]
    p2 = _first((idx > p) & ~space, idx, n)
    den_start = jnp.where(slash & in_line(p2) & (dig[jnp.clip(p2, 0, n - 1)] >= 0), p2, n)
    has_den = den_start < n
    den_end = jnp.minimum(_first((idx >= den_start) & ~is_digit, idx, n), e)
    den_val, den_ok = _number(dig, den_start, den_end, idx)
    a = answer.astype(jnp.int32)
    # value == answer for an answer >= 0 (a negative value equals it only when it is zero)
    int_ok = (run_val == a) & ~frac_nonzero
    ratio_ok = (den_val > 0) & jnp.where(a > 0, (run_val % jnp.maximum(a, 1) == 0) & (run_val // jnp.maximum(a, 1)
                                                                                       == den_val), run_val == 0)
    zero_ok = ~run_nonzero & ~frac_nonzero
    pure_ok = ~jnp.any((idx >= d) & (idx < r) & (dig > 0)) & (a == 0)
    value_ok = jnp.where(pure_frac, pure_ok,
                         jnp.where(has_den, ~frac & ratio_ok & den_ok,
                                   jnp.where(frac, int_ok, run_val == a)))
    sign_ok = ~negative | jnp.where(pure_frac, True, jnp.where(has_den, run_val == 0, zero_ok))
    correct = has & run_ok & value_ok & sign_ok & (a >= 0)
    stated = (h >= 0) & (s < L)  # a ``####`` whose line holds something: the text scorer's format reward
    return correct, stated


def hash_answer_rewards(completion: Array, completion_mask: Array, answer: Array,
                        classes: TokenClasses) -> tuple[Array, Array]:
    """``(correct, stated)``, each ``(S,)`` float32: the ``correctness`` and ``format`` rewards of
    :func:`grpojax.grpo.score_completions` (``hash`` format) computed on token ids.

    Args:
      completion: ``(S, N)`` token ids; ``completion_mask``: ``(S, N)`` bool (True up to and including EOS).
      answer: ``(S,)`` integer answers.
      classes: the vocabulary's :func:`token_classes`.
    """
    ok, stated = jax.vmap(lambda t, m, a: _row_correct(t, m, a, classes))(
        completion.astype(jnp.int32), completion_mask.astype(jnp.bool_), answer)
    return ok.astype(jnp.float32), stated.astype(jnp.float32)


def hash_answer_correct(completion: Array, completion_mask: Array, answer: Array, classes: TokenClasses) -> Array:
    """``(S,)`` float32: 1 where the completion's ``#### N`` answer equals ``answer`` (see
    :func:`hash_answer_rewards`)."""
    return hash_answer_rewards(completion, completion_mask, answer, classes)[0]
