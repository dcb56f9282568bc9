"""Fill a corpus cache from GitHub: download every file a manifest pins, keep it only if its sha256 matches.

The public runs of ``benchmarks/corpus/MANIFEST.tsv`` and of the held-out manifests
(``benchmarks/forecast_holdout/MANIFEST.tsv``, ``benchmarks/forecast_holdout_2/MANIFEST.tsv``) are not committed (most of their repositories carry no licence); each manifest row pins a repository, a commit,
the path(s) of the file(s) and their sha256. This script downloads
``<base-url>/<repo>/<commit>/<path>`` for every file not yet in the cache (``<cache>/<id>/<basename>``),
checks its sha256 and moves it into place; a file whose digest differs is reported and not kept. It is the
only step that reaches the network (``make corpus-cache``); the experiments read the cache.

Usage::

    python benchmarks/corpus/fetch.py [--manifest benchmarks/corpus/MANIFEST.tsv] [--cache data/corpus-cache]
        [--base-url https://raw.githubusercontent.com]

Exit status: 1 when a file could not be fetched or its sha256 differs; 0 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import http.client
import pathlib
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE_URL = "https://raw.githubusercontent.com"


def manifest_files(manifest: pathlib.Path) -> list[dict[str, str]]:
    """One entry per pinned file: ``id``, ``repo``, ``commit``, ``path``, ``sha256`` (a row's ``paths`` and
    ``sha256`` may hold several values separated by ``;``, in the same order; the column may be ``path``)."""
    with open(manifest, newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t")
        rows = list(reader)
        columns = set(reader.fieldnames or ())
    need = {"id", "repo", "commit", "sha256"}
    if not need <= columns or not columns & {"path", "paths"}:
        raise ValueError(f"{manifest}: columns {sorted(columns)}; expected a tab-separated manifest with "
                         "id, repo, commit, path (or paths) and sha256")
    out = []
    for row in rows:
        paths = (row.get("paths") or row.get("path") or "").split(";")
        shas = row.get("sha256", "").split(";")
        if len(paths) != len(shas) or not all(paths):
            raise ValueError(f"{manifest.name}: row {row.get('id')!r} has {len(paths)} paths and {len(shas)} sha256 "
                             "values; expected one sha256 per path")
        out += [{"id": row["id"], "repo": row["repo"], "commit": row["commit"], "path": p, "sha256": s}
                for p, s in zip(paths, shas)]
    return out


def fetch(manifest: pathlib.Path, cache: pathlib.Path, base_url: str = BASE_URL, timeout: float = 60.0):
    """Download the missing files of ``manifest`` into ``cache``; ``(fetched, present, failed)`` lines."""
    fetched, present, failed = [], [], []
    for f in manifest_files(manifest):
        dest = cache / f["id"] / pathlib.PurePosixPath(f["path"]).name
        if dest.is_file() and hashlib.sha256(dest.read_bytes()).hexdigest() == f["sha256"]:
            present.append(f"{f['id']}: {dest.name}")
            continue
        # the path is quoted: a folder name may hold spaces or other characters a URL cannot carry as they are
        url = f"{base_url.rstrip('/')}/{f['repo']}/{f['commit']}/{urllib.parse.quote(f['path'])}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (a pinned https/file URL)
                data = resp.read()
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            failed.append(f"{f['id']}: {url}: {exc}")
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest != f["sha256"]:
            failed.append(f"{f['id']}: {url} has sha256 {digest}, the manifest says {f['sha256']}; not kept")
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=dest.parent, delete=False) as tmp:
            tmp.write(data)
        pathlib.Path(tmp.name).replace(dest)
        fetched.append(f"{f['id']}: {dest.name}")
    return fetched, present, failed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", default=str(ROOT / "benchmarks" / "corpus" / "MANIFEST.tsv"), help="manifest (TSV)")
    ap.add_argument("--cache", default=str(ROOT / "data" / "corpus-cache"), help="cache folder (files at <id>/<name>)")
    ap.add_argument("--base-url", default=BASE_URL, help=f"where <repo>/<commit>/<path> is served (default {BASE_URL})")
    a = ap.parse_args(argv)
    manifest = pathlib.Path(a.manifest)
    if not manifest.is_file():
        ap.error(f"--manifest {a.manifest!r} is not a file")
    try:
        fetched, present, failed = fetch(manifest, pathlib.Path(a.cache), a.base_url)
    except ValueError as exc:
        ap.error(str(exc))
    for line in failed:
        print("FAILED ", line)
    print(f"{manifest}: {len(fetched)} fetched, {len(present)} already present, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
