"""Tokenizer of a Hugging Face checkpoint directory (``tokenizers`` + ``jinja2``, no transformers needed).

Reads ``tokenizer.json`` (the fast-tokenizer file every Qwen2/Llama checkpoint ships) and
``tokenizer_config.json`` (special tokens, chat template; a ``chat_template.jinja`` file is also accepted).
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

__all__ = ["Tokenizer", "load_tokenizer"]


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

    Attributes:
        bos_token, eos_token, pad_token, unk_token: special token strings (or ``None``).
        bos_id, eos_id, pad_id: their ids (``pad_id`` falls back to ``eos_id``).
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
    ):
        self.backend = tokenizer
        self.bos_token, self.eos_token, self.pad_token, self.unk_token = bos_token, eos_token, pad_token, unk_token
        self.chat_template = chat_template
        self._template = None
        self.bos_id = self._id(bos_token)
        self.eos_id = self._id(eos_token) if eos_token is not None else eos_id
        if self.eos_id is None:
            raise ValueError("the tokenizer defines no eos token (tokenizer_config.json eos_token, config.json eos_token_id)")
        pad = self._id(pad_token)
        self.pad_id = self.eos_id if pad is None else pad

    def _id(self, token: str | None) -> int | None:
        if token is None:
            return None
        i = self.backend.token_to_id(token)
        if i is None:
            raise ValueError(f"special token {token!r} is not in the tokenizer's vocabulary")
        return int(i)

    @property
    def vocab_size(self) -> int:
        """Number of token ids (including added tokens)."""
        return self.backend.get_vocab_size(with_added_tokens=True)

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
            raise ValueError("this tokenizer has no chat_template (tokenizer_config.json / chat_template.jinja)")
        if self._template is None:
            self._template = _compile_template(self.chat_template)
        special = {"bos_token": self.bos_token, "eos_token": self.eos_token, "pad_token": self.pad_token,
                   "unk_token": self.unk_token}
        text = self._template.render(messages=list(messages), add_generation_prompt=add_generation_prompt,
                                     **{**special, **kwargs})
        return self.encode(text, add_special_tokens=False) if tokenize else text


def load_tokenizer(path: str | pathlib.Path) -> Tokenizer:
    """The tokenizer of a Hugging Face checkpoint directory.

    Raises:
        FileNotFoundError: no ``tokenizer.json`` in ``path``.
    """
    path = pathlib.Path(path)
    tj = path / "tokenizer.json"
    if not tj.is_file():
        raise FileNotFoundError(f"no tokenizer.json in {path} (only fast tokenizers are supported)")
    backend = tokenizers.Tokenizer.from_file(str(tj))
    cfg = json.loads((path / "tokenizer_config.json").read_text()) if (path / "tokenizer_config.json").is_file() else {}
    template = cfg.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template}
        template = named.get("default", next(iter(named.values()), None))
    if (path / "chat_template.jinja").is_file():
        template = (path / "chat_template.jinja").read_text()
    eos_fallback = None
    if (path / "config.json").is_file():
        eos = json.loads((path / "config.json").read_text()).get("eos_token_id")
        eos_fallback = eos[0] if isinstance(eos, list) and eos else eos
    return Tokenizer(
        backend,
        bos_token=_token_str(cfg.get("bos_token")),
        eos_token=_token_str(cfg.get("eos_token")),
        pad_token=_token_str(cfg.get("pad_token")),
        unk_token=_token_str(cfg.get("unk_token")),
        chat_template=template,
        eos_id=eos_fallback,
    )
