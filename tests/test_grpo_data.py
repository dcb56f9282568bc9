"""GSM8K / MATH JSONL loading, the arithmetic generator, deterministic sampling, the char tokenizer."""

from __future__ import annotations

import json

import pytest

from grpojax.grpo import arith_problems, correctness_reward, sample_batch, split_heldout
from grpojax.grpo._data import load_jsonl
from grpojax.lm import char_tokenizer, codec_from_tokenizer


def test_load_gsm8k_and_math(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text(
        json.dumps({"question": "Q1?", "answer": "2+2=4\n#### 4"}) + "\n\n"
        + json.dumps({"problem": "P2", "solution": "so \\boxed{\\frac{1}{2}}"}) + "\n"
        + json.dumps({"prompt": "P3", "answer": "1,000"}) + "\n"
    )
    probs = load_jsonl(p)
    assert [x.answer for x in probs] == ["4", "\\frac{1}{2}", "1,000"]
    assert probs[0].solution.endswith("#### 4")
    assert len(load_jsonl(p, limit=1)) == 1


def test_load_jsonl_bad_input(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_jsonl(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 1"}\n{not json}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not valid JSON"):
        load_jsonl(bad)
    bad.write_text('{"text": "q"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: record has keys \['text'\]"):
        load_jsonl(bad)


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_arith_solutions_are_correct(difficulty):
    probs = arith_problems(200, difficulty=difficulty, seed=3)
    # the worked solution is itself a correct completion, and every equation in it is true
    assert correctness_reward([p.solution for p in probs], [p.answer for p in probs]).all()
    for p in probs:
        for line in p.solution.splitlines()[:-1]:
            lhs, rhs = line.split("=")
            assert eval(lhs) == int(rhs) >= 0  # noqa: S307 - generated digits and + - * only
    assert arith_problems(5, difficulty=difficulty, seed=3) == probs[:5]


def test_arith_difficulty_knob():
    easy = arith_problems(300, difficulty=1, seed=0)
    hard = arith_problems(300, difficulty=5, seed=0)
    assert max(int(p.answer) for p in easy) < 20
    assert {len(p.solution.splitlines()) - 1 for p in easy} == {1}  # one equation per problem
    assert {len(p.solution.splitlines()) - 1 for p in hard} == {3}
    assert max(int(p.answer) for p in hard) > 100
    with pytest.raises(ValueError, match="difficulty=9"):
        arith_problems(3, difficulty=9)


def test_sampling_is_pure_and_split_is_disjoint():
    probs = arith_problems(500, difficulty=2, seed=0)
    a = sample_batch(probs, 8, seed=1, index=7)
    assert a == sample_batch(probs, 8, seed=1, index=7)
    assert a != sample_batch(probs, 8, seed=1, index=8)
    assert len({p.question for p in a}) == 8
    train, held = split_heldout(probs, 0.2)
    assert not {p.question for p in train} & {p.question for p in held}
    assert 0.1 < len(held) / len(probs) < 0.3
    with pytest.raises(ValueError, match="exceeds the dataset size"):
        sample_batch(probs[:3], 4, seed=0, index=0)


def test_char_tokenizer_round_trip():
    codec = codec_from_tokenizer(char_tokenizer())
    text = "Ann has 12 pens.\n12+7=19\n#### 19 $3.50 \\boxed{1/2}"
    ids = codec.encode(text)
    assert len(ids) == len(text)
    assert codec.decode(ids + [codec.eos_id, codec.pad_id]) == text
    assert codec.eos_id != codec.pad_id
