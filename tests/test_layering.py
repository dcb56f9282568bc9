"""The package layering of grpojax, checked on the source (AST, no imports), and a plain import of every module.

Order, lowest first: the shared bottom modules ``grpojax/_*.py`` (they import no grpojax package), then
``dynamics -> bandit -> sde -> sweep -> logs -> fit -> diagnose -> plot -> lm -> grpo -> monitor -> cli``.
A package may import only packages before it; nothing imports ``grpojax.cli``; ``grpojax.lm`` imports
only the bottom modules. No module imports another package's private module (``grpojax.X._y``) or
private name (``from grpojax.X import _y``), and the modules of one package import each other without
cycles. Imports inside functions count like module-level ones.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import pkgutil
import textwrap
from typing import NamedTuple

import pytest

import grpojax

#: Packages, lowest first. A package may import only packages before it (missing ones are allowed).
ORDER = ("dynamics", "bandit", "sde", "sweep", "logs", "fit", "diagnose", "plot", "lm", "grpo", "monitor", "cli")

ROOT = pathlib.Path(grpojax.__file__).parent


class Violation(NamedTuple):
    """One broken rule: ``kind`` (order, cli, lm, bottom, unknown, private-module, private-name, cycle),
    the importing module, the line of the import (0 for a cycle) and a readable message."""

    kind: str
    module: str
    line: int
    message: str

    def __str__(self) -> str:
        where = f"{self.module}:{self.line}" if self.line else self.module
        return f"[{self.kind}] {where}: {self.message}"


class _Import(NamedTuple):
    line: int
    target: str  # absolute dotted module named by the statement (``X`` of ``import X`` / ``from X import ...``)
    names: tuple[str, ...]  # names of ``from X import names`` (empty for ``import X``)


def _modules(root: pathlib.Path) -> dict[str, tuple[pathlib.Path, bool]]:
    """Dotted module name -> (file, is_package) for every ``.py`` file under ``root`` (a package folder)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        parts = rel.parts
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_pkg)
    return out


def _imports(path: pathlib.Path, module: str, is_pkg: bool) -> list[_Import]:
    """Every import statement of the file, at any depth (functions, classes, ``if`` blocks), resolved."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.extend(_Import(node.lineno, a.name, ()) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append(_Import(node.lineno, target, tuple(a.name for a in node.names)))
    return out


def _package(module: str, top: str) -> str | None:
    """The layer of a module: a subpackage name, ``"_x"`` for a bottom module, None for ``top`` itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == top else None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))
    return sorted(comps)


def _cycle_path(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """A shortest cycle through ``comp[0]`` inside the strongly connected component ``comp``."""
    start, inside = comp[0], set(comp)
    prev: dict[str, str] = {}
    queue = [start]
    for v in queue:
        for w in sorted(graph[v] & inside):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return path[::-1]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    raise AssertionError(f"{comp} is not a cycle")


def check_layering(root: str | pathlib.Path, order: tuple[str, ...] = ORDER) -> list[Violation]:
    """All layering violations of the package in folder ``root`` (e.g. ``.../grpojax``), sorted.

    Reads the source only (nothing is imported). The package's name is the folder's name.
    """
    root = pathlib.Path(root)
    top = root.name
    mods = _modules(root)
    rank = {p: i for i, p in enumerate(order)}
    found: list[Violation] = []
    graph: dict[str, set[str]] = {m: set() for m in mods}

    for mod, (path, is_pkg) in mods.items():
        src = _package(mod, top)
        for imp in _imports(path, mod, is_pkg):
            # the modules this statement loads: ``from X import name`` loads X.name when that is a module
            targets = [imp.target]
            if imp.names:
                subs = [f"{imp.target}.{n}" for n in imp.names if f"{imp.target}.{n}" in mods]
                if subs:
                    targets = subs + ([imp.target] if len(subs) < len(imp.names) else [])
            for t in targets:
                dst = _package(t, top)
                if dst is None or not t.startswith(top + "."):
                    continue  # not grpojax, or the top-level package itself
                if dst == src:
                    if t in graph and t != mod:
                        graph[mod].add(t)
                    continue
                v = lambda kind, msg: found.append(Violation(kind, mod, imp.line, msg))  # noqa: E731
                if src is None or src.startswith("_"):
                    if not dst.startswith("_"):
                        v("bottom", f"imports {t}; bottom modules import no {top} package")
                    continue
                if dst.startswith("_"):
                    pass  # shared bottom modules: anyone may import them
                elif dst not in rank:
                    v("unknown", f"imports {t}: {top}.{dst} is not in the package order")
                elif dst == "cli":
                    v("cli", f"imports {t}; nothing imports {top}.cli")
                elif src == "lm":
                    v("lm", f"imports {t}; {top}.lm imports only the shared bottom modules")
                elif src in rank and rank[dst] > rank[src]:
                    v("order", f"imports {t}; {top}.{src} may import only packages before it, not {top}.{dst}")
                private = [p for p in t.split(".")[2:] if p.startswith("_")]
                if private and not dst.startswith("_"):
                    v("private-module", f"imports {t}, a private module of {top}.{dst}")
            if imp.names and _package(imp.target, top) not in (None, src):
                for n in imp.names:  # private modules named this way were reported above
                    if n.startswith("_") and f"{imp.target}.{n}" not in mods:
                        found.append(Violation("private-name", mod, imp.line,
                                               f"imports the private name {n} from {imp.target}"))

    for comp in _cycles(graph):
        path = _cycle_path(graph, comp)
        found.append(Violation("cycle", comp[0], 0, "import cycle: " + " -> ".join(path + [path[0]])))
    return sorted(set(found))


# --------------------------------------------------------------------------------------------- tests


def test_grpojax_layering():
    found = check_layering(ROOT)
    for v in found:
        print(v)
    assert not found, f"{len(found)} layering violation(s):\n" + "\n".join(map(str, found))


def _tree(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for rel, text in files.items():
        p = tmp_path / "grpojax" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return tmp_path / "grpojax"


def test_checker_reports_each_kind(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "",
        "_io.py": "import json\n",
        "_bad_bottom.py": "from grpojax.dynamics import f\n",
        "dynamics/__init__.py": "from ._laws import f\n",
        "dynamics/_laws.py": "def f():\n    import grpojax._io\n    from grpojax import bandit\n",
        "bandit/__init__.py": "from ._mf import g\n",
        "bandit/_mf.py": "from grpojax.dynamics import f\nfrom .. import _io\ndef g(): pass\n",
        "sweep/__init__.py": "",
        "sweep/_engine.py": "import grpojax.bandit._mf as mf\nfrom grpojax.bandit import _helper\n",
        "plot/__init__.py": "from grpojax.bandit import _mf\n",
        "lm/__init__.py": "from grpojax.dynamics import f\n",
        "grpo/__init__.py": "from ._a import a\nfrom ._c import c\n",
        "grpo/_a.py": "from ._b import b\ndef a(): pass\n",
        "grpo/_b.py": "def b():\n    from grpojax.grpo._a import a\n",
        "grpo/_c.py": "from grpojax.grpo import a\ndef c(): pass\n",
        "fit/__init__.py": "from ..cli import main\n",
        "llm/__init__.py": "",
        "diagnose/__init__.py": "import grpojax.llm\n",
        "cli/__init__.py": "from grpojax.grpo import a\nfrom grpojax.lm import f\nfrom grpojax._io import x\n",
    })
    found = check_layering(root)
    got = {(v.kind, v.module) for v in found if v.kind != "cycle"}
    assert got == {
        ("bottom", "grpojax._bad_bottom"),
        ("order", "grpojax.dynamics._laws"),  # function-level import of a later package
        ("private-module", "grpojax.sweep._engine"),  # import grpojax.bandit._mf
        ("private-name", "grpojax.sweep._engine"),  # from grpojax.bandit import _helper
        ("private-module", "grpojax.plot"),  # from grpojax.bandit import _mf
        ("lm", "grpojax.lm"),
        ("cli", "grpojax.fit"),  # relative ``from ..cli import``
        ("unknown", "grpojax.diagnose"),
    }, "\n".join(map(str, found))
    lines = {(v.kind, v.module): v.line for v in found}
    assert lines[("order", "grpojax.dynamics._laws")] == 3 and lines[("private-name", "grpojax.sweep._engine")] == 2
    cycles = sorted(v.message for v in found if v.kind == "cycle")
    assert cycles == [
        "import cycle: grpojax.grpo -> grpojax.grpo._c -> grpojax.grpo",  # via the package's __init__
        "import cycle: grpojax.grpo._a -> grpojax.grpo._b -> grpojax.grpo._a",  # closed inside a function
    ], cycles


def test_checker_cycles_function_level_and_clean_tree(tmp_path):
    # a two-module cycle closed only by a function-level import, and nothing else
    root = _tree(tmp_path, {
        "__init__.py": "",
        "sde/__init__.py": "from grpojax.sde._x import x\n",
        "sde/_x.py": "from grpojax.sde._y import y\ndef x(): pass\n",
        "sde/_y.py": "def y():\n    from grpojax.sde._x import x\n    return x\n",
    })
    assert [(v.kind, v.message) for v in check_layering(root)] == [
        ("cycle", "import cycle: grpojax.sde._x -> grpojax.sde._y -> grpojax.sde._x")
    ]
    (root / "sde" / "_y.py").write_text("def y():\n    return 1\n")
    assert check_layering(root) == []


def test_every_module_imports():
    def fail(name):
        raise ImportError(f"importing package {name} failed")

    names = [m.name for m in pkgutil.walk_packages(grpojax.__path__, "grpojax.", onerror=fail)]
    assert {"grpojax.lm", "grpojax.grpo", "grpojax.cli"} <= set(names)
    for name in names:
        if name.rsplit(".", 1)[-1] == "__main__":
            continue
        importlib.import_module(name)


@pytest.mark.parametrize("name", ["grpojax.lm", "grpojax.grpo"])
def test_lm_and_grpo_export_all(name):
    mod = importlib.import_module(name)
    assert sorted(mod.__all__) == sorted(set(mod.__all__))
    missing = [n for n in mod.__all__ if not hasattr(mod, n)]
    assert not missing, missing


def test_importing_grpojax_starts_no_jax_backend():
    """Importing any grpojax module must not run a JAX computation: a multi-process program has to call
    ``jax.distributed.initialize`` before the first one."""
    import subprocess
    import sys

    code = (
        "import importlib, pkgutil, grpojax\n"
        "for m in pkgutil.walk_packages(grpojax.__path__, 'grpojax.'):\n"
        "    importlib.import_module(m.name)\n"
        "from jax._src import xla_bridge\n"
        "assert not xla_bridge.backends_are_initialized(), 'a JAX backend was started at import time'\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"})
    assert res.returncode == 0, res.stderr[-2000:]
