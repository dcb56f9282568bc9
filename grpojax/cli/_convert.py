"""``grpojax convert-gguf``: a GGUF (llama.cpp) checkpoint -> a Hugging Face folder grpojax and transformers load."""

from __future__ import annotations

import argparse

from grpojax.cli._common import console, refuse_existing

EXAMPLE = """\
Example:
  grpojax convert-gguf SmolLM2-135M-Instruct.Q4_1.gguf models/smollm2-135m-instruct

The folder gets config.json, model.safetensors (dequantised float32 weights), tokenizer.json,
tokenizer_config.json (chat template, special tokens) and generation_config.json (EOS/pad ids);
`make real-model` fetches and converts SmolLM2-135M-Instruct this way.
"""


def register(sub) -> None:
    p = sub.add_parser(
        "convert-gguf",
        aliases=["convert"],
        help="convert a GGUF (llama.cpp) Llama/Qwen2 checkpoint into a Hugging Face folder",
        description="Convert a GGUF checkpoint (Llama or Qwen2 architecture, byte-level BPE tokenizer) into a "
        "Hugging Face folder: weights dequantised with the gguf package, the tokenizer rebuilt from the GGUF "
        "vocabulary and merges, chat template and EOS ids kept.\n\n" + EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("gguf_file", metavar="FILE.gguf", help="the GGUF checkpoint")
    p.add_argument("out", metavar="OUT_DIR", help="output folder (refused when it exists and is not empty)")
    p.add_argument("--dtype", choices=("float32", "float16"), default="float32",
                   help="dtype of the written weights (default float32: the dequantised values exactly)")
    p.add_argument("--force", action="store_true", help="write into an existing, non-empty OUT_DIR")
    p.set_defaults(func=run)


def run(args) -> int:
    from grpojax.lm import from_gguf

    out = refuse_existing(args.out, args.force)
    from_gguf(args.gguf_file, out, dtype=args.dtype)
    console.print(f"converted {args.gguf_file} -> {out}")
    return 0
