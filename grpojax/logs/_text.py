"""Helpers every reader shares: loading a log's text, naming a run after its file, finding event files.

Text is read the same way by every reader: a gzip-compressed file (``run.jsonl.gz``, found by its magic
bytes, whatever its name) is decompressed; a byte-order mark says UTF-8, UTF-16 or UTF-32 and is
dropped; UTF-16 without a mark (every other byte zero in ASCII text) is recognised; anything else is
UTF-8 with undecodable bytes replaced.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import os
import re
import zlib

import numpy as np

from grpojax.logs._runlog import LogFormatError

__all__ = ["load_text", "read_text", "iter_text", "holds_any", "read_head", "decode_text", "plain_name", "run_name", "is_event_file",
           "find_event_dirs", "event_files"]

_GZIP_MAGIC = b"\x1f\x8b"
#: byte-order marks, longest first (the UTF-32 LE mark starts with the UTF-16 LE one)
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def _encoding(raw: bytes) -> tuple[str, int]:
    """(encoding, length of its byte-order mark) of the bytes that start a text file."""
    for bom, enc in _BOMS:
        if raw.startswith(bom):
            return enc, len(bom)
    probe = raw[:4096]
    if len(probe) >= 4:  # UTF-16 without a mark: ASCII text has a zero in every other byte
        even, odd = probe[0::2], probe[1::2]
        if odd.count(0) >= 0.9 * len(odd) and even.count(0) == 0:
            return "utf-16-le", 0
        if even.count(0) >= 0.9 * len(even) and odd.count(0) == 0:
            return "utf-16-be", 0
    return "utf-8", 0


def decode_text(raw: bytes) -> str:
    """Text from a file's bytes: the encoding its byte-order mark names (the mark dropped), UTF-16 without
    a mark, else UTF-8; undecodable bytes are replaced."""
    enc, skip = _encoding(raw)
    return raw[skip:].decode(enc, errors="replace")


@contextlib.contextmanager
def _reading(path: str):
    """A folder, or gzip data that will not decompress, as a :class:`LogFormatError` naming ``path``; a
    missing or unreadable file as the OS error it is."""
    try:
        yield
    except IsADirectoryError:
        raise LogFormatError(path, "is a folder, expected a file") from None
    except (OSError, EOFError, zlib.error) as e:
        if isinstance(e, (FileNotFoundError, PermissionError)):
            raise
        raise LogFormatError(path, f"gzip-compressed but cannot be decompressed ({e})") from None


def _read_bytes(path: str, limit: int | None = None) -> tuple[bytes, bool]:
    """(the file's bytes, decompressed when gzip, at most ``limit`` of them; whether there are more)."""
    with _reading(path):
        with open(path, "rb") as f:
            raw = f.read(limit + 1 if limit is not None else -1)
            if raw[:2] != _GZIP_MAGIC:
                more = limit is not None and len(raw) > limit
                return (raw[:limit] if more else raw), more
        with gzip.open(path, "rb") as g:
            raw = g.read(limit + 1 if limit is not None else -1)
    more = limit is not None and len(raw) > limit
    return (raw[:limit] if more else raw), more


def read_text(path: str) -> str:
    """The file's text (decompressed and decoded as the module docstring says); a folder is a
    :class:`LogFormatError`."""
    return decode_text(_read_bytes(path)[0])


#: bytes of a log decoded at a time by iter_text (its text is never held whole)
TEXT_PIECE = 1 << 23


def iter_text(path: str, piece: int | None = None, *, with_bytes: bool = False):
    """The file's text, decoded as :func:`read_text` decodes it, in pieces of about ``piece`` bytes, each
    ending at a line end (``\\n``) or the end of the file, so that a long log is never in memory at once.

    UTF-8 (most logs; gzip-compressed too) is decoded a piece at a time: a piece ends after a newline
    byte, which is never inside a multi-byte character, so the pieces joined are :func:`read_text`'s
    text, undecodable bytes included. A file in UTF-16 or UTF-32 is one piece. A folder is a
    :class:`LogFormatError`. ``piece``: default :data:`TEXT_PIECE`. ``with_bytes``: yield ``(bytes, text)``
    pairs, the piece's UTF-8 bytes beside its text (None for a file in UTF-16 or UTF-32), for
    :func:`holds_any`.
    """
    piece = piece or TEXT_PIECE
    with _reading(path):
        with open(path, "rb") as f:
            gz = f.read(2) == _GZIP_MAGIC
        with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
            buf = f.read(max(piece, 4096))  # (the encoding is told by the first 4096 bytes, as read_text does)
            enc, skip = _encoding(buf)
            if enc != "utf-8":
                text = (buf + f.read())[skip:].decode(enc, errors="replace")
                yield (None, text) if with_bytes else text
                return
            buf = buf[skip:]
            while True:
                more = f.read(piece)
                if not more:
                    if buf:
                        yield (buf, buf.decode("utf-8", errors="replace")) if with_bytes else \
                            buf.decode("utf-8", errors="replace")
                    return
                buf += more
                cut = buf.rfind(b"\n", len(buf) - len(more)) + 1  # the last newline of the new bytes
                if cut:
                    out = buf[:cut]
                    yield (out, out.decode("utf-8", errors="replace")) if with_bytes else \
                        out.decode("utf-8", errors="replace")
                    buf = buf[cut:]


def holds_any(raw: bytes, needles) -> bool:
    """Whether any of the ASCII strings ``needles`` occurs in the UTF-8 bytes ``raw`` (so in their text:
    an ASCII byte is never part of a multi-byte character): ``any(n.encode() in raw for n in needles)``,
    with one vectorised pass over ``raw`` per distinct first (or last, when fewer) character instead of one
    search per needle."""
    a = np.frombuffer(raw, dtype=np.uint8)
    at_end = len({n[-1] for n in needles}) <= len({n[0] for n in needles})
    groups: dict[str, list[str]] = {}
    for n in needles:
        groups.setdefault(n[-1] if at_end else n[0], []).append(n)
    for c, group in groups.items():
        where = np.flatnonzero(a == ord(c))
        for n in group:
            k = len(n) - 1 if at_end else 0  # the anchor's place in the needle
            p = where[(where >= k) & (where <= a.size - len(n) + k)] - k  # where the needle would start
            for j in range(len(n)):  # keep the starts where its j-th byte matches too
                if j != k:
                    p = p[a[p + j] == ord(n[j])]
                    if not p.size:
                        break
            if p.size:
                return True
    return False


def read_head(path: str, limit: int) -> tuple[bytes, str, bool]:
    """The first ``limit`` bytes of the file (decompressed when gzip), their text, and whether the file
    holds more."""
    raw, more = _read_bytes(path, limit)
    return raw, decode_text(raw), more


def plain_name(path: str) -> str:
    """The file's name without a ``.gz`` ending (``run.jsonl.gz`` -> ``run.jsonl``)."""
    base = os.path.basename(str(path))
    return base[:-3] if base.lower().endswith(".gz") else base


def load_text(path, text: str | None) -> tuple[str, str]:
    """(path as str, its text): ``text`` if given, else the file's; an empty one is a LogFormatError."""
    path = str(path)
    if text is None:
        text = read_text(path)
    if not text or text.isspace():  # (not text.strip(): a copy of the whole file)
        raise LogFormatError(path, "empty file")
    return path, text


def run_name(path: str) -> str:
    """A run's default name: its output folder for ``trainer_state.json``, else the file name's stem."""
    p = os.path.abspath(path)
    base = plain_name(p)
    if base == "trainer_state.json":
        parent = os.path.dirname(p)
        if re.fullmatch(r"checkpoint-\d+", os.path.basename(parent)):
            parent = os.path.dirname(parent)
        return os.path.basename(parent) or base
    for suf in ("-trainer_state.json", "_trainer_state.json", ".json", ".jsonl", ".log", ".txt", ".csv"):
        if base.endswith(suf):
            return base[: -len(suf)]
    return base


def is_event_file(name: str) -> bool:
    """True for a TensorBoard event file name (``events.out.tfevents.*``)."""
    return "tfevents" in os.path.basename(name)


def _natural_key(name: str) -> tuple:
    """Sort key comparing the digit runs of ``name`` as numbers (``...26825.9`` before ``...26825.10``)."""
    return tuple(int(p) if i % 2 else p for i, p in enumerate(re.split(r"(\d+)", name)))


def event_files(folder: str) -> list[str]:
    """The event files directly inside ``folder`` in creation order: their names
    (``events.out.tfevents.<time>.<host>.<pid>.<counter><suffix>``) with the numbers compared as numbers."""
    names = [f for f in os.listdir(folder) if is_event_file(f) and os.path.isfile(os.path.join(folder, f))]
    return [os.path.join(folder, f) for f in sorted(names, key=_natural_key)]


def find_event_dirs(root: str) -> list[str]:
    """Every folder under ``root`` (itself included) that directly holds event files, sorted."""
    out = []
    for d, _, files in os.walk(root):
        if any(is_event_file(f) for f in files):
            out.append(d)
    return sorted(out)
