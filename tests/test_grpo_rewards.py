"""Answer extraction, numeric equivalence and reward callables."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from grpojax.grpo import correctness_reward, score_completions
from grpojax.grpo._rewards import (
    answers_equal,
    combine_rewards,
    extract_answer,
    extract_boxed,
    format_reward,
    parse_number,
)


@pytest.mark.parametrize(
    "text, want",
    [
        ("so 3+4=7\n#### 7", "7"),
        ("#### 1,234", "1,234"),
        ("#### $1,234.50 dollars", "$1,234.50"),
        ("We get \\boxed{\\frac{1}{2}} finally", "\\frac{1}{2}"),
        ("\\boxed{x^{2}+1} and later \\boxed{\\dfrac{3}{4}}", "\\dfrac{3}{4}"),
        ("The answer is -12.", "-12"),
        ("Answer: 3/4", "3/4"),
        ("no marker 12 then 13", None),
        ("", None),
        ("#### ", None),
        ("\\boxed{unbalanced", None),
    ],
)
def test_extract_answer(text, want):
    assert extract_answer(text) == want


def test_extract_fallback_last_number():
    assert extract_answer("no marker 12 then 13", fallback_last_number=True) == "13"
    assert extract_boxed("a \\fbox{5} b") == "5"


@pytest.mark.parametrize(
    "s, want",
    [
        ("1,234", Fraction(1234)),
        ("-1,234.50", Fraction(-2469, 2)),
        ("+3", Fraction(3)),
        ("−2", Fraction(-2)),
        ("$12", Fraction(12)),
        ("12 dollars", Fraction(12)),
        ("12 cm", Fraction(12)),
        ("0.50", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("3/4", Fraction(3, 4)),
        ("\\frac{3}{4}", Fraction(3, 4)),
        ("-\\dfrac{6}{8}", Fraction(-3, 4)),
        ("45%", Fraction(9, 20)),
        ("1e3", Fraction(1000)),
        ("12.", Fraction(12)),
        ("abc", None),
        ("1/0", None),
        ("1,23", None),
    ],
)
def test_parse_number(s, want):
    assert parse_number(s) == want


@pytest.mark.parametrize(
    "a, b, eq",
    [
        ("1,000", "1000", True),
        ("0.5", "\\frac{1}{2}", True),
        ("$5.00", "5", True),
        ("-3", "3", False),
        ("7", "7 apples", True),
        ("x+1", "x + 1", True),
        ("x+1", "1", False),
        (None, "1", False),
        ("", "", False),
    ],
)
def test_answers_equal(a, b, eq):
    assert answers_equal(a, b) is eq


def test_correctness_and_format_rewards():
    comps = ["3+4=7\n#### 7", "#### 8", "I think 7", "\\boxed{7.0}"]
    answers = ["7", "7", "7", "#### 7"]
    np.testing.assert_array_equal(correctness_reward(comps, answers), [1, 0, 0, 1])
    np.testing.assert_array_equal(format_reward(comps, answers), [1, 1, 0, 1])
    combo = combine_rewards([correctness_reward, format_reward], [1.0, 0.1])
    np.testing.assert_allclose(combo(comps, answers), [1.1, 0.1, 0.0, 1.1], rtol=1e-6)
    with pytest.raises(ValueError, match="2 functions but 1 weights"):
        combine_rewards([correctness_reward, format_reward], [1.0])
    with pytest.raises(ValueError, match="3 completions but 2 answers"):
        correctness_reward(comps[:3], answers[:2])


def test_unparseable_scores_zero_and_is_counted():
    s = score_completions(["garbage", "#### 5", "5"], ["5", "5", "5"], {"correctness": 1.0, "format": 0.5})
    np.testing.assert_allclose(s.rewards, [0.0, 1.5, 0.0])
    np.testing.assert_array_equal(s.correct, [0, 1, 0])
    assert s.unparsed == 2
    with pytest.raises(ValueError, match="unknown reward function"):
        score_completions(["x"], ["1"], {"length": 1.0})


# ---------------------------------------------------------------- answer formats (ParseOptions)
from grpojax import ConfigError  # noqa: E402
from grpojax.grpo._rewards import ANSWER_FORMATS, ParseOptions  # noqa: E402


@pytest.mark.parametrize(
    "text, want",
    [
        ("4 + 4 = 8", "8"),
        ("so 10 - 3 is what we need", "3"),  # a spaced minus is an operator, not a sign
        ("it is -3.", "-3"),
        ("in total 1,234 apples, 2 baskets", "2"),
        ("price $12.50", "$12.50"),
        ("x3 and y", None),  # digits glued to a word are no number
        ("half is 1/2", "1/2"),
    ],
)
def test_last_number_fallback(text, want):
    assert extract_answer(text, fallback_last_number=True) == want
    assert extract_answer(text, options=ParseOptions(("last_number",))) == want
    assert extract_answer(text) is None  # off by default


def test_fallback_scores_a_bare_equation():
    assert correctness_reward(["4 + 4 = 8"], ["8"]).tolist() == [0.0]
    assert correctness_reward(["4 + 4 = 8"], ["8"], fallback_last_number=True).tolist() == [1.0]
    opts = ParseOptions(fallback_last_number=True)
    assert correctness_reward(["4 + 4 = 8"], ["#### 8"], options=opts).tolist() == [1.0]
    s = score_completions(["4 + 4 = 8", "no idea"], ["8", "8"], {"correctness": 1.0, "format": 0.5}, options=opts)
    assert s.rewards.tolist() == [1.0, 0.0] and s.unparsed == 1  # a bare number is no format


TEXT = "<answer>12</answer> so \\boxed{13}, #### 14, the answer is 15, finally 16"


@pytest.mark.parametrize(
    "formats, want",
    [
        (("boxed",), "13"),
        (("hash",), "14"),
        (("answer_tag",), "12"),
        (("answer_is",), "15"),
        (("last_number",), "16"),
        (("answer_tag", "boxed"), "12"),
        (("hash", "answer_tag"), "14"),
    ],
)
def test_formats_and_their_order(formats, want):
    assert extract_answer(TEXT, options=ParseOptions(formats)) == want


@pytest.mark.parametrize(
    "text, want",
    [
        ("<answer> \\frac{1}{2} </answer>", "\\frac{1}{2}"),
        ("<answer>The total is 42 apples.</answer>", "42"),
        ("<ANSWER>x+1</ANSWER>", "x+1"),
        ("<answer>1</answer> then <answer>\n2\n</answer>", "2"),
        ("<answer>3", None),
    ],
)
def test_answer_tag(text, want):
    assert extract_answer(text, options=ParseOptions(("answer_tag",))) == want


def test_format_reward_counts_only_the_configured_markers():
    opts = ParseOptions(("answer_tag",), fallback_last_number=True)
    got = format_reward(["<answer>3</answer>", "#### 3", "just 3"], options=opts)
    assert got.tolist() == [1.0, 0.0, 0.0]
    assert format_reward(["#### 3", "<answer>3</answer>"]).tolist() == [1.0, 0.0]


def test_parse_options_is_frozen_hashable_and_validated():
    a = ParseOptions(["boxed", "last_number"])
    assert a.formats == ("boxed", "last_number") and a == ParseOptions(("boxed", "last_number"))
    assert hash(a) == hash(ParseOptions(("boxed", "last_number")))
    with pytest.raises(AttributeError):
        a.formats = ("hash",)
    assert ParseOptions(fallback_last_number=True).order == ("boxed", "hash", "answer_is", "last_number")
    assert set(ANSWER_FORMATS) == {"boxed", "hash", "answer_tag", "answer_is", "last_number"}
    assert ParseOptions.from_dict({"formats": ["hash"], "fallback_last_number": True}).order == ("hash", "last_number")
    assert ParseOptions("hash") == ParseOptions(formats=["hash"])  # one name is a list of one
    for bad, needle in (({"formats": ["bold"]}, r"^formats\[0\]='bold'; expected 'boxed', 'hash'"),
                        ({"formats": []}, r"^formats=\[\]; expected at least one of boxed"),
                        ({"formats": ["hash", "hash"]}, r"^formats=\['hash', 'hash'\]; a format repeats"),
                        ({"fallback": True}, r"^unknown key 'fallback'; expected one of \['fallback_last_number'"),
                        ({"fallback_last_number": "yes"}, r"^fallback_last_number='yes'; expected a YAML boolean")):
        with pytest.raises(ConfigError, match=needle):
            ParseOptions.from_dict(bad)
        with pytest.raises(ConfigError, match=needle):
            ParseOptions(**bad)
