"""A character-level tokenizer (``tokenizers`` library) for the offline tiny-arith task.

Vocabulary: ``<pad>`` (0), ``<eos>`` (1), ``<unk>`` (2), then the printable ASCII characters and
newline, one token each. Built in code, so nothing is downloaded; the trainer saves it as
``tokenizer.json`` next to the run's checkpoints.
"""

from __future__ import annotations

import pathlib
import string
from typing import NamedTuple

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

from grpojax._errors import InvalidValueError

__all__ = ["TextCodec", "char_tokenizer", "codec_from_tokenizer", "word_tokenizer"]

_SPECIALS = ("<pad>", "<eos>", "<unk>")


def char_tokenizer(alphabet: str | None = None) -> Tokenizer:
    """A :class:`tokenizers.Tokenizer` mapping every character of ``alphabet`` to one token."""
    chars = alphabet if alphabet is not None else _PRINTABLE
    vocab = {s: i for i, s in enumerate(_SPECIALS)}
    for c in dict.fromkeys(chars):
        vocab.setdefault(c, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(list(_SPECIALS))
    return tok


_PRINTABLE = "".join(c for c in string.printable if c not in "\t\r\x0b\x0c")
#: word pieces: ``####``, a word with its leading space, one digit, or any other single character
_WORD_RE = r"####| ?[A-Za-z]+|[\s\S]"


def word_tokenizer(corpus: list[str], *, min_count: int = 1) -> Tokenizer:
    """A word-level tokenizer for a closed vocabulary (e.g. the arithmetic generator's stories).

    Words (with their leading space, GPT-2 style) seen at least ``min_count`` times in ``corpus``
    get one token each; digits and all other printable characters are single tokens, so numbers
    are spelled digit by digit (what arithmetic needs) and any printable text still round-trips
    except unseen words, which become ``<unk>``. Decoding concatenates the pieces exactly.
    """
    import re
    from collections import Counter

    counts = Counter(m for text in corpus for m in re.findall(r" ?[A-Za-z]+", text))
    vocab = {s: i for i, s in enumerate(_SPECIALS)}
    for c in _PRINTABLE:
        vocab.setdefault(c, len(vocab))
    vocab.setdefault("####", len(vocab))
    for w, n in sorted(counts.items()):
        if n >= min_count:
            vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(_WORD_RE), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(list(_SPECIALS))
    return tok


class TextCodec(NamedTuple):
    """What the trainer needs from a tokenizer: ids in, text out, special ids.

    Attributes:
        tokenizer: the ``tokenizers`` backend.
        eos_id: the end-of-sequence id (appended to supervised targets).
        pad_id: the padding id.
        eos_ids: every id that ends a completion (``eos_id`` first); empty means ``(eos_id,)``.
    """

    tokenizer: Tokenizer
    eos_id: int
    pad_id: int
    eos_ids: tuple = ()

    @property
    def stop_ids(self) -> tuple[int, ...]:
        """The ids that end a completion: ``eos_ids``, or ``(eos_id,)`` when that is empty."""
        return tuple(self.eos_ids) or (self.eos_id,)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def save(self, path: str | pathlib.Path) -> None:
        self.tokenizer.save(str(path))


def codec_from_tokenizer(tok: Tokenizer, *, eos: str | int | None = None, pad: str | int | None = None) -> TextCodec:
    """Wrap a tokenizer; ``eos``/``pad`` default to ``<eos>``/``<pad>`` (or ``<|endoftext|>``/``</s>``)."""

    def find(spec, names):
        if isinstance(spec, int):
            return spec
        for name in ([spec] if spec else []) + list(names):
            i = tok.token_to_id(name)
            if i is not None:
                return i
        return None

    eos_id = find(eos, ["<eos>", "<|endoftext|>", "</s>", "<|im_end|>", "<|eot_id|>"])
    if eos_id is None:
        raise InvalidValueError("tokenizer has no end-of-sequence token; pass eos=<token or id>")
    pad_id = find(pad, ["<pad>", "<|endoftext|>", "<unk>"])
    return TextCodec(tok, int(eos_id), int(eos_id if pad_id is None else pad_id))
