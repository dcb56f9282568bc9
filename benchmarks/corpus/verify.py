"""Check the corpus files against ``MANIFEST.tsv``: sha256 of every file present, list of the missing ones.

A run's files are looked for under ``benchmarks/corpus/<id>/`` (committed, licence allows it) and then
under the git-ignored cache ``data/corpus-cache/<id>/``, by the base name of each manifest path. For every
missing file the line shows where to fetch it (repository, commit, path).

Exit status: 1 when a present file's sha256 differs from the manifest (or, with ``--strict``, when a file
is missing); 0 otherwise.

Usage:
  python benchmarks/corpus/verify.py [--strict]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
CACHE = HERE.parents[1] / "data" / "corpus-cache"


def check(manifest: pathlib.Path = HERE / "MANIFEST.tsv") -> tuple[list[str], list[str], list[str]]:
    """``(ok, missing, mismatched)`` lines, one per manifest file."""
    ok, missing, bad = [], [], []
    with open(manifest, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    for row in rows:
        paths, shas = row["paths"].split(";"), row["sha256"].split(";")
        if len(paths) != len(shas):
            bad.append(f"{row['id']}: {len(paths)} paths but {len(shas)} sha256 values in the manifest")
            continue
        for p, sha in zip(paths, shas):
            name = pathlib.PurePosixPath(p).name
            found = [d / name for d in (HERE / row["id"], CACHE / row["id"]) if (d / name).is_file()]
            if not found:
                missing.append(f"{row['id']}: {name} missing; fetch https://github.com/{row['repo']} "
                               f"at {row['commit']} : {p} into {CACHE.name}/{row['id']}/")
                continue
            digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
            if digest == sha:
                ok.append(f"{row['id']}: {found[0]} ok")
            else:
                bad.append(f"{row['id']}: {found[0]} has sha256 {digest}, manifest says {sha}")
    return ok, missing, bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict", action="store_true", help="a missing file is an error too")
    a = ap.parse_args(argv)
    ok, missing, bad = check()
    for line in bad:
        print("MISMATCH", line)
    for line in missing:
        print("MISSING ", line)
    print(f"{len(ok)} files verified, {len(missing)} missing, {len(bad)} mismatched")
    return 1 if bad or (a.strict and missing) else 0


if __name__ == "__main__":
    sys.exit(main())
