"""Every shell and Python snippet of README.md and docs/guide runs as written, within its time budget.

A fenced ``bash`` or ``python`` block is run in a scratch folder that holds the repository's ``tests/``,
``examples/`` and ``experiments/`` and, under the placeholder names the pages use
(``outputs/checkpoint-500/trainer_state.json``, ``run.log`` ...), logs shipped with the tests. A block
runs with the default budget unless the line before its opening fence says otherwise:

- ``<!-- snippet: budget=SECONDS -->``: a longer budget (the page says how long the command takes);
- ``<!-- snippet: skip: REASON -->``: not run here, for the reason given (another machine, a download,
  a cluster; or an excerpt of a script that a test runs whole).

The snippets take many minutes together, so the test is in the slow suite; a fast test checks that every
block is either run or skipped with a reason.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs" / "guide").glob("*.md"))]
DEFAULT_BUDGET_S = 180
FIXTURES = REPO / "tests" / "fixtures"
# placeholder paths the pages use -> the shipped log that stands in for them
PLACEHOLDERS = {
    "outputs/checkpoint-500/trainer_state.json": FIXTURES / "quickstart" / "trainer_state.json",
    "run.log": FIXTURES / "logs" / "verl_console.log",
    "run/metrics.jsonl": FIXTURES / "logs" / "grpojax.jsonl",
    "runs/tiny/metrics.jsonl": FIXTURES / "watch" / "metrics.jsonl",
    "my_run.yaml": REPO / "grpojax" / "grpo" / "configs" / "tiny-arith.yaml",
}
_FENCE = re.compile(r"^```(\w*)\s*$")
_DIRECTIVE = re.compile(r"<!--\s*snippet:\s*(skip:\s*(?P<reason>.+?)|budget=(?P<budget>\d+))\s*-->")


@dataclasses.dataclass(frozen=True)
class Snippet:
    page: str
    line: int
    lang: str
    code: str
    budget_s: int
    skip: str | None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def snippets() -> list[Snippet]:
    out = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = _FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            lang = m.group(1)
            if lang in ("bash", "python"):
                prev = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
                d = _DIRECTIVE.search(prev)
                skip = d.group("reason") if d and d.group("reason") else None
                budget = int(d.group("budget")) if d and d.group("budget") else DEFAULT_BUDGET_S
                out.append(Snippet(str(page.relative_to(REPO)), i + 1, lang, "\n".join(lines[i + 1:j]), budget, skip))
            i = j + 1
    return out


SNIPPETS = snippets()


def test_snippets_are_found_and_every_skip_has_a_reason():
    assert len(SNIPPETS) >= 20
    run = [s for s in SNIPPETS if s.skip is None]
    assert len(run) >= len(SNIPPETS) // 2, "most snippets must run"
    for s in SNIPPETS:
        assert s.skip is None or len(s.skip) > 10, f"{s.id}: a skip needs a reason"
        assert s.code.strip(), f"{s.id}: empty block"


def test_the_command_line_page_names_every_flag_of_every_command():
    """docs/guide/cli.md keeps up with the parser: each ``--flag`` of each subcommand is named in the
    command's section (or, for flags shared with ``fit``/``predict``, in the page)."""
    import argparse

    from grpojax.cli import build_parser

    page = (REPO / "docs" / "guide" / "cli.md").read_text()
    sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", page, flags=re.S | re.M))
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, parser in sub.choices.items():
        if name == "convert":  # the alias of convert-gguf
            continue
        assert name in sections, f"docs/guide/cli.md has no section '## {name}'"
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help" and not re.search(
                        rf"{re.escape(flag)}(?![\w-])", sections[name] if name not in ("simulate", "watch") else page):
                    missing.append(f"{name} {flag}")
    assert not missing, f"flags missing from docs/guide/cli.md: {missing}"


def _sandbox(tmp_path: pathlib.Path) -> pathlib.Path:
    for name in ("tests", "examples", "experiments"):
        (tmp_path / name).symlink_to(REPO / name)
    for dest, src in PLACEHOLDERS.items():
        (tmp_path / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, tmp_path / dest)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("snippet", [s for s in SNIPPETS], ids=[s.id for s in SNIPPETS])
def test_snippet_runs(snippet: Snippet, tmp_path):
    if snippet.skip is not None:
        pytest.skip(snippet.skip)
    cwd = _sandbox(tmp_path)
    env = dict(os.environ, PATH=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=str(REPO), MPLBACKEND="Agg")
    argv = ["bash", "-euo", "pipefail", "-c", snippet.code] if snippet.lang == "bash" else [sys.executable, "-c",
                                                                                           snippet.code]
    # a session of its own: at the budget the whole process group goes (a command the shell started
    # would otherwise keep the pipes open and the test waiting)
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(timeout=snippet.budget_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{snippet.id} took longer than its budget of {snippet.budget_s} s")
    took = time.monotonic() - t0
    print(f"{snippet.id}: {took:.1f} s of {snippet.budget_s} s")
    assert proc.returncode == 0, f"{snippet.id} failed ({proc.returncode}):\n{out[-1500:]}\n{err[-3000:]}"
    assert "Traceback" not in err, f"{snippet.id} printed a traceback:\n{err[-3000:]}"
