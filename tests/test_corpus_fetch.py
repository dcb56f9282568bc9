"""`benchmarks/corpus/fetch.py`: files pinned by a manifest land in the cache only with the manifest's sha256
(served from a local folder through a file:// base URL: no network)."""

from __future__ import annotations

import hashlib
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _fetch_module():
    spec = importlib.util.spec_from_file_location("corpus_fetch", ROOT / "benchmarks" / "corpus" / "fetch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fetch_keeps_matching_files_refuses_mismatches_and_skips_present_ones(tmp_path):
    mod = _fetch_module()
    served = tmp_path / "served"
    good, bad = b'{"log_history": []}\n', b"changed upstream\n"
    for rel, data in (("o/a/" + "1" * 40 + "/logs/run.json", good), ("o/b/" + "2" * 40 + "/x.txt", bad)):
        (served / rel).parent.mkdir(parents=True)
        (served / rel).write_bytes(data)
    sha = hashlib.sha256(good).hexdigest()
    manifest = tmp_path / "MANIFEST.tsv"
    manifest.write_text("id\trepo\tcommit\tpaths\tsha256\n"
                        f"run-a\to/a\t{'1' * 40}\tlogs/run.json\t{sha}\n"
                        f"run-b\to/b\t{'2' * 40}\tx.txt\t{'0' * 64}\n"
                        f"run-c\to/c\t{'3' * 40}\tmissing.json\t{sha}\n")
    cache = tmp_path / "cache"
    fetched, present, failed = mod.fetch(manifest, cache, served.as_uri())
    assert fetched == ["run-a: run.json"] and present == []
    assert (cache / "run-a" / "run.json").read_bytes() == good
    assert not (cache / "run-b").exists()  # a file whose sha256 differs is not kept
    assert len(failed) == 2 and "not kept" in failed[0] and "missing.json" in failed[1]
    # a second call finds the file in place and downloads nothing; the exit status says what failed
    fetched, present, failed = mod.fetch(manifest, cache, served.as_uri())
    assert fetched == [] and present == ["run-a: run.json"]
    assert mod.main(["--manifest", str(manifest), "--cache", str(cache), "--base-url", served.as_uri()]) == 1


def test_the_project_manifests_pin_one_sha256_per_path(tmp_path):
    mod = _fetch_module()
    for rel in ("benchmarks/corpus/MANIFEST.tsv", "benchmarks/forecast_holdout/MANIFEST.tsv"):
        files = mod.manifest_files(ROOT / rel)
        assert files and all(len(f["sha256"]) == 64 and len(f["commit"]) == 40 for f in files), rel
    bad = ROOT / "benchmarks" / "corpus" / "MANIFEST.tsv"
    rows = bad.read_text().splitlines()
    header, first = rows[0], rows[1].split("\t")
    first[header.split("\t").index("sha256")] += ";" + "0" * 64
    broken = tmp_path / "MANIFEST.tsv"
    broken.write_text(header + "\n" + "\t".join(first) + "\n")
    with pytest.raises(ValueError, match="one sha256 per path"):
        mod.manifest_files(broken)


def test_a_file_that_is_not_a_manifest_is_one_clear_error(tmp_path, capsys):
    mod = _fetch_module()
    notes = tmp_path / "notes.tsv"
    notes.write_text("name\tvalue\nx\t1\n")
    with pytest.raises(ValueError, match="expected a tab-separated manifest with id, repo, commit"):
        mod.manifest_files(notes)
    with pytest.raises(SystemExit) as exc:
        mod.main(["--manifest", str(notes), "--cache", str(tmp_path / "cache")])
    assert exc.value.code == 2 and "expected a tab-separated manifest" in capsys.readouterr().err


def test_a_path_with_spaces_is_fetched(tmp_path):
    """A pinned path may hold spaces (a folder named ``training curves``): the URL quotes it (served over HTTP
    from a local folder on the loopback address, as the real base URL is HTTP)."""
    import functools  # noqa: PLC0415
    import http.server  # noqa: PLC0415
    import threading  # noqa: PLC0415

    mod = _fetch_module()
    data = b"step,reward\n1,0.5\n"
    rel = "o/a/" + "1" * 40 + "/Results/training curves/run 1.csv"
    (tmp_path / "served" / rel).parent.mkdir(parents=True)
    (tmp_path / "served" / rel).write_bytes(data)
    manifest = tmp_path / "MANIFEST.tsv"
    manifest.write_text("id\trepo\tcommit\tpath\tsha256\n"
                        f"run-a\to/a\t{'1' * 40}\tResults/training curves/run 1.csv\t{hashlib.sha256(data).hexdigest()}\n")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(Quiet, directory=str(tmp_path / "served")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        fetched, _, failed = mod.fetch(manifest, tmp_path / "cache", base, timeout=10)
    finally:
        server.shutdown()
    assert fetched == ["run-a: run 1.csv"] and failed == []
    assert (tmp_path / "cache" / "run-a" / "run 1.csv").read_bytes() == data
