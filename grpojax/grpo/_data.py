"""Math problem datasets: GSM8K / MATH JSONL loading, prompts, deterministic batch sampling.

A dataset is a list of :class:`Problem`. GSM8K records have ``question`` and ``answer`` (a worked
solution ending in ``#### N``); MATH records have ``problem`` and ``solution`` (with ``\\boxed{}``)
and optionally ``answer``. :func:`load_jsonl` accepts both (and ``prompt``/``answer`` pairs).

Batches are drawn without global state: :func:`sample_batch` is a pure function of
``(seed, index)``, so a resumed run draws exactly the prompts an uninterrupted run would.
"""

from __future__ import annotations

import json
import pathlib
import zlib
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from grpojax._errors import InvalidValueError
from grpojax.grpo._rewards import reference_answer

__all__ = ["Problem", "chat_messages", "chat_prompt_ids", "format_prompt", "load_jsonl", "sample_batch", "split_heldout"]


class Problem(NamedTuple):
    """One verifiable problem.

    Attributes:
      question: the problem text shown to the model.
      answer: the final answer (bare string, e.g. ``"19"`` or ``"\\frac{1}{2}"``).
      solution: a worked solution ending in the answer (for supervised warm starts), or ``""``.
    """

    question: str
    answer: str
    solution: str = ""


def _record_to_problem(rec: dict, where: str) -> Problem:
    if "question" in rec and "answer" in rec:  # GSM8K
        sol = str(rec["answer"])
        return Problem(str(rec["question"]), reference_answer(sol), sol)
    if "problem" in rec and ("solution" in rec or "answer" in rec):  # MATH
        sol = str(rec.get("solution", ""))
        ans = str(rec["answer"]) if "answer" in rec else reference_answer(sol)
        return Problem(str(rec["problem"]), ans, sol)
    if "prompt" in rec and "answer" in rec:
        return Problem(str(rec["prompt"]), reference_answer(str(rec["answer"])), "")
    raise InvalidValueError(
        f"{where}: record has keys {sorted(rec)}; expected GSM8K (question, answer), "
        "MATH (problem, solution[, answer]) or (prompt, answer)"
    )


def load_jsonl(path: str | pathlib.Path, *, limit: int | None = None) -> list[Problem]:
    """Load GSM8K- or MATH-format JSONL into problems.

    Raises:
      FileNotFoundError: if ``path`` does not exist.
      ValueError: on a line that is not JSON or lacks the expected keys (names file and line).
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset file {path} does not exist")
    out: list[Problem] = []
    with path.open() as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(rec, dict):
                raise InvalidValueError(f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}")
            out.append(_record_to_problem(rec, f"{path}:{lineno}"))
            if limit is not None and len(out) >= limit:
                break
    if not out:
        raise InvalidValueError(f"{path}: no problems found")
    return out


def split_heldout(problems: Sequence[Problem], frac: float = 0.1) -> tuple[list[Problem], list[Problem]]:
    """Split by a hash of the question (stable across runs, no question in both parts)."""
    if not 0.0 < frac < 1.0:
        raise InvalidValueError(f"split_heldout: frac={frac}; expected 0 < frac < 1")
    train, held = [], []
    for p in problems:
        h = zlib.crc32(p.question.encode()) % 10_000
        (held if h < frac * 10_000 else train).append(p)
    return train, held


def sample_batch(problems: Sequence[Problem], batch: int, *, seed: int, index: int) -> list[Problem]:
    """``batch`` distinct problems drawn as a pure function of ``(seed, index)``."""
    if batch > len(problems):
        raise InvalidValueError(f"sample_batch: batch={batch} exceeds the dataset size {len(problems)}")
    rng = np.random.default_rng([int(seed), int(index), 0x6770])
    idx = rng.choice(len(problems), size=batch, replace=False)
    return [problems[i] for i in idx]


def format_prompt(question: str, template: str = "{question}\n") -> str:
    """The model's prompt text for a question (``template`` has one ``{question}`` field)."""
    if "{question}" not in template:
        raise InvalidValueError(f"prompt template {template!r} has no {{question}} field")
    return template.format(question=question)


class ChatTokenizer(Protocol):
    """What :func:`chat_prompt_ids` needs: ``grpojax.lm.Tokenizer`` (or transformers' tokenizers) fit."""

    def apply_chat_template(self, messages, *, add_generation_prompt: bool = ..., tokenize: bool = ...) -> Any: ...


def chat_messages(question: str, *, system_prompt: str | None = None, template: str = "{question}") -> list[dict]:
    """The chat turns of a problem: an optional system turn, then the user turn ``template`` filled in.

    Args:
      question: the problem text.
      system_prompt: the system turn's content; ``None`` or ``""`` sends none (the chat template may then
        write its own default system turn).
      template: the user turn, with one ``{question}`` field.
    """
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return messages + [{"role": "user", "content": format_prompt(question, template)}]


def chat_prompt_ids(
    question: str,
    tokenizer: ChatTokenizer,
    *,
    system_prompt: str | None = None,
    template: str = "{question}",
) -> list[int]:
    """The prompt token ids of a problem through the tokenizer's chat template.

    The conversation of :func:`chat_messages` is rendered with ``add_generation_prompt=True`` (the template
    opens the assistant turn, so the completion is the model's answer) and encoded without adding special
    tokens (the template writes them).

    Args:
      question: the problem text.
      tokenizer: a tokenizer with a chat template (``grpojax.lm.load_tokenizer(folder)``).
      system_prompt: optional system turn.
      template: the user turn, with one ``{question}`` field.

    Raises:
      ValueError: the template has no ``{question}`` field, or the tokenizer has no chat template.
    """
    ids = tokenizer.apply_chat_template(chat_messages(question, system_prompt=system_prompt, template=template),
                                        add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):  # transformers' BatchEncoding
        ids = ids["input_ids"]
    return [int(i) for i in ids]
