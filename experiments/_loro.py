"""Leave-one-repository-out evaluation: the one protocol every real-run experiment uses.

Runs from the same repository share a model, a task, a reward and a logging habit, so a method tuned on
some runs of a repository and scored on others of it is scored on what it was tuned on. Here each
repository in turn is held out: whatever the method tunes is chosen on the runs of the *other*
repositories only, and the held-out repository's runs are scored with it. Scores are reported per
repository and then averaged over repositories (every repository weighs the same, however many runs it
holds).

Use (``repo_of`` maps an item to its repository name)::

    for repo, train, test in folds(runs, repo_of):
        choice = tune(train)               # sees no run of `repo`
        per_repo[repo] = score(choice, test)
    print(summary(per_repo))

Usable from the experiment scripts as ``from _loro import folds, summary`` (their folder is on
``sys.path`` when they run; tests load it with ``tests/_experiments.load_experiment("_loro")``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

RESERVED_REPOS = frozenset({
    "tonywang1990/gsm8k-grpo", "T-zy/Search-R1_inforcement", "a36600248-eng/CODE-GRPO",
    "aaravarora01/agent-memory-redteam", "jorahn/rookworld-rlvr", "abdo-ashraf/Gemma-3-RL-Finetuning",
    "alexchilton/CAS_NLP_MODULE4_GRPO", "Sunshine535/nips-grpo-dynamics", "yushengsu-thu/verl_training_log",
    "eric-haibin-lin/verl-data", "uqcxu9/qwen2.5_300step_NEW_CONSIS_RESULT",
})
"""Repositories kept for held-out evaluation: no development experiment reads, tunes on or scores their runs."""


def reserved(repo: str) -> bool:
    """Whether ``repo`` (``owner/name``, case-insensitive) is kept for held-out evaluation."""
    return repo.strip().lower() in {r.lower() for r in RESERVED_REPOS}


def by_repo(items: Iterable[T], repo_of: Callable[[T], str]) -> dict[str, list[T]]:
    """``{repository: [items]}``, repositories in case-insensitive alphabetical order, items in input order."""
    groups: dict[str, list[T]] = {}
    for it in items:
        repo = repo_of(it)
        if not isinstance(repo, str) or not repo:
            raise ValueError(f"repository of {it!r} is {repo!r}; expected a non-empty string")
        groups.setdefault(repo, []).append(it)
    return {r: groups[r] for r in sorted(groups, key=lambda r: (r.lower(), r))}


def folds(items: Iterable[T], repo_of: Callable[[T], str]) -> Iterator[tuple[str, list[T], list[T]]]:
    """Yield ``(held-out repository, train items, test items)`` once per repository.

    ``train`` holds every item of every other repository, ``test`` the held-out repository's items; with
    a single repository there is nothing to train on and ``train`` is empty.
    """
    groups = by_repo(items, repo_of)
    for repo, test in groups.items():
        train = [it for r, its in groups.items() if r != repo for it in its]
        yield repo, train, test


def _mean(xs: list[float]) -> float:
    xs = [float(x) for x in xs if x is not None and math.isfinite(float(x))]
    return sum(xs) / len(xs) if xs else float("nan")


def summary(per_repo: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Per-repository scores and their average over repositories.

    ``per_repo``: ``{repository: {metric: value}}``; a value that is None or not finite (a repository with
    no positive run has no recall) is left out of that metric's average. Returns
    ``{"per_repo": {...}, "mean": {metric: average}, "n_repos": {metric: repositories averaged}}``.
    """
    metrics = sorted({m for d in per_repo.values() for m in d})
    mean, n = {}, {}
    for m in metrics:
        vals = [d.get(m) for d in per_repo.values()]
        ok = [v for v in vals if isinstance(v, (int, float)) and math.isfinite(float(v))]
        mean[m], n[m] = _mean(ok), len(ok)
    return {"per_repo": {r: dict(d) for r, d in per_repo.items()}, "mean": mean, "n_repos": n}
