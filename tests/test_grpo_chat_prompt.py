"""Chat-template prompts: a problem -> the prompt token ids through a tiny chat template (system turn optional)."""

from __future__ import annotations

import pytest

from grpojax.grpo import chat_prompt_ids
from grpojax.grpo._data import chat_messages
from grpojax.lm import Tokenizer, char_tokenizer

# a tiny template in the ChatML style, with a default system turn when none is given
TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}[S]default[/S]{% endif %}"
    "{% for m in messages %}{% if m['role'] == 'system' %}[S]{{ m['content'] }}[/S]"
    "{% else %}[{{ m['role'][0] | upper }}]{{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}[A]{% endif %}"
)


@pytest.fixture(scope="module")
def tok():
    backend = char_tokenizer()
    return Tokenizer(backend, eos_token="<eos>", pad_token="<pad>", chat_template=TEMPLATE)


def _ids(tok, pieces):
    """Hand encoding: special tokens by id, everything else one character at a time."""
    out = []
    for p in pieces:
        out += [tok.eos_id] if p == "<eos>" else [tok.backend.token_to_id(c) for c in p]
    return out


def test_prompt_ids_with_and_without_system_prompt(tok):
    got = chat_prompt_ids("2+3?", tok)
    assert got == _ids(tok, ["[S]default[/S][U]2+3?", "<eos>", "[A]"])
    got = chat_prompt_ids("2+3?", tok, system_prompt="Be brief.")
    assert got == _ids(tok, ["[S]Be brief.[/S][U]2+3?", "<eos>", "[A]"])
    assert chat_prompt_ids("2+3?", tok, system_prompt="") == chat_prompt_ids("2+3?", tok)


def test_user_turn_template(tok):
    got = chat_prompt_ids("2+3?", tok, template="Q: {question} Answer with ####.")
    assert got == _ids(tok, ["[S]default[/S][U]Q: 2+3? Answer with ####.", "<eos>", "[A]"])
    assert chat_messages("x", system_prompt="s", template="<{question}>") == [
        {"role": "system", "content": "s"}, {"role": "user", "content": "<x>"}]
    with pytest.raises(ValueError, match="question"):
        chat_prompt_ids("2+3?", tok, template="no field")


def test_no_chat_template_is_refused():
    plain = Tokenizer(char_tokenizer(), eos_token="<eos>")
    with pytest.raises(ValueError, match="chat_template"):
        chat_prompt_ids("2+3?", plain)


def test_same_ids_as_transformers_on_a_real_template(tmp_path):
    """The converted-GGUF tokenizer's ChatML template gives what transformers renders and encodes."""
    import transformers  # a dependency: an import error must fail, not skip
    from test_lm_gguf import write_tiny_gguf

    from grpojax.lm import from_gguf, load_tokenizer

    write_tiny_gguf(tmp_path / "t.gguf")
    out = from_gguf(tmp_path / "t.gguf", tmp_path / "hf")
    ours = chat_prompt_ids("What is 12 + 7?", load_tokenizer(out), system_prompt="Think.")
    hf = transformers.AutoTokenizer.from_pretrained(str(out))
    msgs = [{"role": "system", "content": "Think."}, {"role": "user", "content": "What is 12 + 7?"}]
    want = hf.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert ours == list(want)
    assert chat_prompt_ids("What is 12 + 7?", hf, system_prompt="Think.") == ours
