"""Tokenizer of a Hugging Face checkpoint directory (``tokenizers`` + ``jinja2``, no transformers needed).

Reads ``tokenizer.json`` (the fast-tokenizer file every Qwen2/Llama checkpoint ships),
``tokenizer_config.json`` (special tokens, chat template; a ``chat_template.jinja`` file is also accepted)
and ``generation_config.json`` (the ids generation stops on).

End-of-sequence and padding ids come from what the checkpoint says, first match wins:

* EOS (the id appended to supervised targets and written by the chat template at the end of a turn):
  the ``eos`` argument, ``tokenizer_config.json``'s ``eos_token``, ``generation_config.json``'s
  ``eos_token_id`` (its first entry), ``config.json``'s ``eos_token_id``; only when none of them says
  anything, a token named ``<eos>``, ``</s>``, ``<|endoftext|>``, ``<|im_end|>`` or ``<|eot_id|>``.
  ``eos_ids`` (every id that ends a completion) adds the other ids of ``generation_config.json``.
* Padding: the ``pad`` argument, ``tokenizer_config.json``'s ``pad_token``,
  ``generation_config.json``'s then ``config.json``'s ``pad_token_id``, else the EOS id.

Chat templates are rendered the way transformers renders them: a sandboxed jinja2 environment with
``trim_blocks``/``lstrip_blocks``, the ``loopcontrols`` extension, a ``tojson`` filter and the
``raise_exception`` / ``strftime_now`` globals, given ``messages``, ``add_generation_prompt`` and the special
token strings.
"""

from __future__ import annotations

import datetime
import json
import pathlib
from typing import Any, Mapping, Sequence

import numpy as np
import tokenizers

from ._char_tokenizer import TextCodec

from grpojax._errors import InvalidValueError

__all__ = ["TOKENIZER_KINDS", "Tokenizer", "check_vocab_fits", "infer_tokenizer_kind", "load_tokenizer"]

#: what :func:`infer_tokenizer_kind` answers: character level, word level, or a subword tokenizer file
TOKENIZER_KINDS = ("char", "word", "file")
_FALLBACK_EOS = ("<eos>", "</s>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>")
_CHAR_SPLIT = r"[\s\S]"


def _token_str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value.get("content")
    return str(value)


def _compile_template(source: str):
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


class Tokenizer:
    """Encode/decode text, batch with left padding, render chat templates.

    Args:
        tokenizer: the ``tokenizers`` backend.
        bos_token, eos_token, pad_token, unk_token: special token strings (or ``None``).
        chat_template: jinja source or ``None``.
        eos_id: the EOS id when ``eos_token`` is not given.
        eos_ids: further ids that end a completion (``generation_config.json``).
        pad_id: the padding id when ``pad_token`` is not given (default: the EOS id).
        extra_config: other ``tokenizer_config.json`` entries, written back by :meth:`save_pretrained`.

    Attributes:
        bos_token, eos_token, pad_token, unk_token: special token strings (or ``None``).
        bos_id, eos_id, pad_id: their ids (``pad_id`` falls back to ``eos_id``).
        eos_ids: every id that ends a completion, ``eos_id`` first.
        chat_template: jinja source or ``None``.
    """

    def __init__(
        self,
        tokenizer: tokenizers.Tokenizer,
        *,
        bos_token: str | None = None,
        eos_token: str | None = None,
        pad_token: str | None = None,
        unk_token: str | None = None,
        chat_template: str | None = None,
        eos_id: int | None = None,
        eos_ids: Sequence[int] = (),
        pad_id: int | None = None,
        extra_config: Mapping[str, Any] | None = None,
    ):
        self.backend = tokenizer
        self.bos_token, self.eos_token, self.pad_token, self.unk_token = bos_token, eos_token, pad_token, unk_token
        self.chat_template = chat_template
        self.extra_config = dict(extra_config or {})
        self._template = None
        self.bos_id = self._id(bos_token)
        if eos_token is not None:
            self.eos_id = self._id(eos_token)
        else:
            self.eos_id = eos_id if eos_id is not None else (int(eos_ids[0]) if len(eos_ids) else None)
        if self.eos_id is None:
            raise InvalidValueError("the tokenizer defines no eos token (tokenizer_config.json eos_token, "
                             "generation_config.json / config.json eos_token_id)")
        self.eos_id = self._check_id(self.eos_id, "eos")
        if self.eos_token is None:
            self.eos_token = self.backend.id_to_token(self.eos_id)
        self.eos_ids = tuple(dict.fromkeys([self.eos_id] + [self._check_id(i, "eos") for i in eos_ids]))
        if pad_token is not None:
            self.pad_id = self._id(pad_token)
        else:
            self.pad_id = self.eos_id if pad_id is None else self._check_id(pad_id, "pad")
            self.pad_token = self.backend.id_to_token(self.pad_id)

    def _id(self, token: str | None) -> int | None:
        if token is None:
            return None
        i = self.backend.token_to_id(token)
        if i is None:
            raise InvalidValueError(f"special token {token!r} is not in the tokenizer's vocabulary")
        return int(i)

    def _check_id(self, i: int, what: str) -> int:
        if self.backend.id_to_token(int(i)) is None:
            raise InvalidValueError(f"{what} id {i} is not in the tokenizer's vocabulary of {self.vocab_size} ids")
        return int(i)

    @property
    def vocab_size(self) -> int:
        """Number of token ids (including added tokens)."""
        return self.backend.get_vocab_size(with_added_tokens=True)

    @property
    def max_id(self) -> int:
        """The largest token id (``vocab_size - 1`` unless the ids have holes)."""
        return max(self.backend.get_vocab(with_added_tokens=True).values())

    def codec(self) -> TextCodec:
        """The trainer's :class:`TextCodec` view of this tokenizer (same ids, EOS and padding)."""
        return TextCodec(self.backend, self.eos_id, self.pad_id, self.eos_ids)
    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text`` (``add_special_tokens`` applies the post-processor, e.g. Llama's BOS)."""
        return list(self.backend.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """Text of ``ids``."""
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def batch_decode(self, ids, *, mask=None, skip_special_tokens: bool = True) -> list[str]:
        """Decode each row of ``ids (B, T)``, keeping only ``mask`` entries when given."""
        ids = np.asarray(ids)
        mask = np.ones(ids.shape, bool) if mask is None else np.asarray(mask, bool)
        return [self.decode(r[m].tolist(), skip_special_tokens=skip_special_tokens) for r, m in zip(ids, mask)]

    def batch_encode(
        self,
        texts: Sequence[str] | Sequence[Sequence[int]],
        *,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Left-padded batch.

        Args:
            texts: strings, or already tokenised id lists.
            add_special_tokens: as in :meth:`encode` (strings only).
            max_length: keep the last ``max_length`` tokens of longer rows (left truncation).
            pad_to_multiple_of: round the padded length up.

        Returns:
            ``(tokens (B, P) int32, mask (B, P) bool)``, pad id ``pad_id`` on the left.
        """
        rows = [self.encode(t, add_special_tokens=add_special_tokens) if isinstance(t, str) else list(t)
                for t in texts]
        if max_length is not None:
            rows = [r[-max_length:] for r in rows]
        P = max([len(r) for r in rows] + [1])
        if pad_to_multiple_of:
            P = -(-P // pad_to_multiple_of) * pad_to_multiple_of
        tokens = np.full((len(rows), P), self.pad_id, np.int32)
        mask = np.zeros((len(rows), P), bool)
        for i, r in enumerate(rows):
            if r:
                tokens[i, P - len(r):] = r
                mask[i, P - len(r):] = True
        return tokens, mask

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = False,
        tokenize: bool = False,
        **kwargs: Any,
    ) -> str | list[int]:
        """Render ``messages`` (``[{"role": ..., "content": ...}, ...]``) with the chat template.

        With ``tokenize=True`` the rendered text is encoded without adding special tokens (the template
        writes them), as transformers does.

        Raises:
            ValueError: the checkpoint has no chat template.
        """
        if self.chat_template is None:
            raise InvalidValueError("this tokenizer has no chat_template (tokenizer_config.json / chat_template.jinja)")
        if self._template is None:
            self._template = _compile_template(self.chat_template)
        special = {"bos_token": self.bos_token, "eos_token": self.eos_token, "pad_token": self.pad_token,
                   "unk_token": self.unk_token}
        text = self._template.render(messages=list(messages), add_generation_prompt=add_generation_prompt,
                                     **{**special, **kwargs})
        return self.encode(text, add_special_tokens=False) if tokenize else text


    def save_pretrained(self, path: str | pathlib.Path) -> pathlib.Path:
        """Write ``tokenizer.json`` and ``tokenizer_config.json`` (special tokens, chat template) into ``path``.

        The folder loads back with :func:`load_tokenizer` (same ids, EOS, padding, template) and with
        transformers' ``AutoTokenizer``. Returns ``path``.
        """
        path = pathlib.Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.backend.save(str(path / "tokenizer.json"))
        cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
               **self.extra_config}
        cfg.update({"bos_token": self.bos_token, "eos_token": self.eos_token, "pad_token": self.pad_token,
                    "unk_token": self.unk_token})
        if self.chat_template is not None:
            cfg["chat_template"] = self.chat_template
        else:
            cfg.pop("chat_template", None)
        (path / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2, ensure_ascii=False))
        return path

    @classmethod
    def from_codec(cls, codec: TextCodec, *, chat_template: str | None = None) -> "Tokenizer":
        """Wrap the trainer's :class:`TextCodec` (character/word level or a file) as a :class:`Tokenizer`."""
        unk = "<unk>" if codec.tokenizer.token_to_id("<unk>") is not None else None
        return cls(codec.tokenizer, eos_id=codec.eos_id, eos_ids=codec.stop_ids, pad_id=codec.pad_id,
                   unk_token=unk, chat_template=chat_template)


def _read_json(path: pathlib.Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidValueError(f"{path} is not valid JSON ({exc.msg})") from None
    return data if isinstance(data, dict) else {}


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return [int(value)]


def _resolve(backend: tokenizers.Tokenizer, spec: str | int, what: str) -> int:
    if isinstance(spec, str):
        i = backend.token_to_id(spec)
        if i is None:
            raise InvalidValueError(f"{what}={spec!r} is not a token of this tokenizer")
        return int(i)
    return int(spec)


def load_tokenizer(
    path: str | pathlib.Path,
    *,
    eos: str | int | Sequence[str | int] | None = None,
    pad: str | int | None = None,
) -> Tokenizer:
    """The tokenizer of a Hugging Face checkpoint directory (or of a ``tokenizer.json`` file).

    Args:
        path: a folder with ``tokenizer.json`` (and optionally ``tokenizer_config.json``,
            ``generation_config.json``, ``config.json``), or a ``tokenizer.json`` file (its folder's
            configuration files are read too).
        eos: override the EOS: a token string or id, or several (the first is the primary EOS).
        pad: override the padding token (string or id).

    Raises:
        FileNotFoundError: no ``tokenizer.json``.
        ValueError: an override or a configured special token is not in the vocabulary.
    """
    path = pathlib.Path(path)
    tj = path if path.is_file() else path / "tokenizer.json"
    folder = tj.parent
    if not tj.is_file():
        raise FileNotFoundError(f"no tokenizer.json in {path} (only fast tokenizers are supported)")
    backend = tokenizers.Tokenizer.from_file(str(tj))
    cfg = _read_json(folder / "tokenizer_config.json")
    gen = _read_json(folder / "generation_config.json")
    model_cfg = _read_json(folder / "config.json")
    template = cfg.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template}
        template = named.get("default", next(iter(named.values()), None))
    if (folder / "chat_template.jinja").is_file():
        template = (folder / "chat_template.jinja").read_text()
    eos_token = _token_str(cfg.get("eos_token"))
    gen_eos = _ids(gen.get("eos_token_id")) or _ids(model_cfg.get("eos_token_id"))
    if eos is not None:
        specs = list(eos) if isinstance(eos, (list, tuple)) else [eos]
        eos_ids = [_resolve(backend, e, "eos") for e in specs]
        eos_token = None
    elif eos_token is not None:
        eos_ids = [_resolve(backend, eos_token, "tokenizer_config.json eos_token")] + gen_eos
    elif gen_eos:
        eos_ids = gen_eos
    else:
        eos_ids = [i for i in (backend.token_to_id(n) for n in _FALLBACK_EOS) if i is not None][:1]
    pad_token = _token_str(cfg.get("pad_token"))
    pad_id = None
    if pad is not None:
        pad_token, pad_id = None, _resolve(backend, pad, "pad")
    elif pad_token is None:
        for source in (gen, model_cfg):
            if source.get("pad_token_id") is not None:
                pad_id = _ids(source["pad_token_id"])[0]
                break
    known = {"bos_token", "eos_token", "pad_token", "unk_token", "chat_template", "added_tokens_decoder"}
    return Tokenizer(
        backend,
        bos_token=_token_str(cfg.get("bos_token")),
        eos_token=eos_token,
        pad_token=pad_token,
        unk_token=_token_str(cfg.get("unk_token")),
        chat_template=template,
        eos_ids=eos_ids,
        pad_id=pad_id,
        extra_config={k: v for k, v in cfg.items() if k not in known},
    )


def _kind_of(tok: tokenizers.Tokenizer) -> str:
    data = json.loads(tok.to_str())
    if (data.get("model") or {}).get("type") != "WordLevel":
        return "file"
    pre = data.get("pre_tokenizer") or {}
    pattern = (pre.get("pattern") or {}).get("Regex")
    return "char" if pattern == _CHAR_SPLIT else "word"


def infer_tokenizer_kind(path: str | pathlib.Path | tokenizers.Tokenizer) -> str:
    """Which kind of tokenizer a checkpoint folder (or ``tokenizer.json``, or a backend) holds.

    Returns:
        ``"char"`` (grpojax's character-level tokenizer), ``"word"`` (a word-level vocabulary) or
        ``"file"`` (a subword tokenizer: BPE, Unigram, WordPiece), the values of ``tokenizer.kind``
        in the training configuration.

    Raises:
        FileNotFoundError: the folder has no ``tokenizer.json``.
    """
    if isinstance(path, tokenizers.Tokenizer):
        return _kind_of(path)
    path = pathlib.Path(path)
    tj = path if path.is_file() else path / "tokenizer.json"
    if not tj.is_file():
        raise FileNotFoundError(f"no tokenizer.json in {path}")
    return _kind_of(tokenizers.Tokenizer.from_file(str(tj)))


def check_vocab_fits(
    tokenizer: Tokenizer | TextCodec | tokenizers.Tokenizer,
    vocab_size: int | Any,
    *,
    pretrained: bool = False,
    kind: str | None = None,
) -> None:
    """Refuse a tokenizer that cannot drive a model.

    Args:
        tokenizer: a :class:`Tokenizer`, :class:`TextCodec` or ``tokenizers`` backend.
        vocab_size: the model's ``vocab_size`` (or its :class:`ModelConfig`).
        pretrained: the model's weights come from a checkpoint (then a character- or word-level tokenizer
            is refused whatever its size: its ids mean nothing to the checkpoint).
        kind: the tokenizer's kind when known (default: :func:`infer_tokenizer_kind`).

    Raises:
        ValueError: one line naming both sizes, when the tokenizer's largest id does not fit
            ``vocab_size`` or a character/word tokenizer meets a pretrained checkpoint.
    """
    backend = getattr(tokenizer, "backend", None) or getattr(tokenizer, "tokenizer", None) or tokenizer
    V = int(getattr(vocab_size, "vocab_size", vocab_size))
    n = backend.get_vocab_size(with_added_tokens=True)
    top = max(backend.get_vocab(with_added_tokens=True).values())
    kind = _kind_of(backend) if kind is None else kind
    if kind not in TOKENIZER_KINDS:
        raise InvalidValueError(f"tokenizer kind {kind!r}; expected one of {TOKENIZER_KINDS}")
    if pretrained and kind in ("char", "word"):
        raise InvalidValueError(f"a {kind}-level tokenizer ({n} tokens) cannot drive the pretrained checkpoint "
                         f"(vocab_size={V}); use the checkpoint's own tokenizer (tokenizer.kind=file)")
    if top + 1 > V:
        raise InvalidValueError(f"tokenizer has {n} tokens (largest id {top}) but the model's vocab_size={V}; "
                         f"expected vocab_size >= {top + 1}")
