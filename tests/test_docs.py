"""The documentation site builds with ``mkdocs build --strict`` and ships no internal references."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]

# Internal references that must never reach a user: the design-notes file, the workspace folder beside
# the repository, and issue numbers of the development tracker.
FORBIDDEN = re.compile(r"DESIGN\.md|\.\./shared|[Ii]ssue ?[0-9]")


def _missing_docs_packages() -> list[str]:
    """The docs packages (mkdocs, mkdocstrings with its python handler, the material theme) not installed."""
    try:
        python_handler = importlib.util.find_spec("mkdocstrings_handlers.python") is not None
    except ModuleNotFoundError:
        python_handler = False
    missing = [m for m in ("mkdocs", "mkdocstrings", "material") if importlib.util.find_spec(m) is None]
    return missing + ([] if python_handler else ["mkdocstrings-python"])


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Build the site once into a temporary folder; return (folder, build output)."""
    missing = _missing_docs_packages()
    if missing:
        pytest.skip(f"documentation packages not installed ({', '.join(missing)}): pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"),
         "--site-dir", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )
    return out, proc.returncode, proc.stdout + proc.stderr


def _hits(paths, root) -> list[str]:
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        for i, line in enumerate(text.splitlines(), 1):
            for m in FORBIDDEN.finditer(line):
                found.append(f"{path.relative_to(root)}:{i}: {m.group(0)!r} in {line.strip()[:120]!r}")
    return found


def test_site_builds_strict_without_warnings(site):
    out, returncode, log = site
    warnings = [ln for ln in log.splitlines() if re.search(r"\bWARNING\b|\bERROR\b", ln)]
    assert returncode == 0, f"mkdocs build --strict failed:\n{log[-4000:]}"
    assert not warnings, "mkdocs printed warnings:\n" + "\n".join(warnings)
    pages = {p.relative_to(out).as_posix() for p in out.rglob("index.html")}
    for page in ("index.html", "model/stability/index.html", "guide/diagnostics/index.html",
                 "api/dynamics/index.html", "api/grpo/index.html", "dev/algorithms/index.html"):
        assert page in pages, f"{page} missing from the built site"
    # the API pages really were generated from the docstrings
    api = (out / "api" / "dynamics" / "index.html").read_text(encoding="utf-8")
    assert "from_hyperparams" in api and "exact_critical_a" in api


def test_sources_and_package_have_no_internal_references():
    files = [p for p in (REPO / "docs").rglob("*.md")]
    files += [REPO / "mkdocs.yml", REPO / "README.md"]
    files += [p for ext in ("*.py", "*.yaml", "*.json") for p in (REPO / "grpojax").rglob(ext)]
    assert len(files) > 20
    hits = _hits(files, REPO)
    assert not hits, "internal references found:\n" + "\n".join(hits)


def test_built_site_has_no_internal_references(site):
    out, returncode, _ = site
    assert returncode == 0
    files = list(out.rglob("*.html")) + list(out.rglob("search_index.json"))
    hits = _hits(files, out)
    assert not hits, "internal references found in the built site:\n" + "\n".join(hits)


def test_forbidden_pattern_catches_what_it_should():
    for bad in ("see DESIGN.md §1", "../shared/real-logs", "Issue 3 asked", "issue9 note"):
        assert FORBIDDEN.search(bad), bad
    for ok in ("an issue with the fit", "designed", "shared/ folder", "tissue"):
        assert not FORBIDDEN.search(ok), ok
