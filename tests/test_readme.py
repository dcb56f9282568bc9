"""The README's quickstart commands run as written (through the CLI entry point, from the repo root)."""

import pathlib
import re
import shlex

import pytest

from grpojax.cli import main

REPO = pathlib.Path(__file__).resolve().parents[1]


def _quickstart_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = re.search(r"<!-- quickstart:begin -->(.*?)<!-- quickstart:end -->", text, re.S)
    assert block, "README.md lost its quickstart block markers"
    return [ln.strip() for ln in block.group(1).splitlines() if ln.strip().startswith("grpojax ")]


def test_quickstart_block_is_not_empty():
    assert len(_quickstart_commands()) >= 3


@pytest.mark.parametrize("command", _quickstart_commands())
def test_quickstart_command_runs(command, monkeypatch, tmp_path):
    monkeypatch.chdir(REPO)
    argv = shlex.split(command)[1:]
    # write into a temporary folder instead of the checkout's out/
    if "--out" in argv:
        i = argv.index("--out")
        argv[i + 1] = str(tmp_path / pathlib.Path(argv[i + 1]).name)
    assert main(argv) == 0
    assert any(tmp_path.rglob("*.json")), f"{command} wrote no JSON"
