"""The verl console reader against independent readings of the same data: the JSONL file logger's lines of
the same steps, the row-by-row text path of the table builder, a regular expression over the whole text, and
the whole text at once for a log read a piece at a time."""

from __future__ import annotations

import gzip
import json
import random
import warnings

import numpy as np
import pytest

from grpojax.logs import LogFormatError, LogWarning, _text, read_logs
from grpojax.logs._table import _FLOAT_BLOCK, TableBuilder
from grpojax.logs._text import holds_any, iter_text, read_text
from grpojax.logs._verl import _STEP_LINE, _step_lines, read_verl_console

#: what a verl console prints between two metric lines: Ray and vLLM records, a progress bar (its block
#: characters make the text non-ASCII), a warning, lines that hold "step:" without being a metric line
NOISE = (
    "(WorkerDict pid=4242) INFO 07-06 22:31:05 [block_pool.py:321] Successfully reset prefix cache",
    "(WorkerDict pid=4242) kwargs: {'n': 1, 'logprobs': 0, 'max_tokens': 500, 'detokenize': False}",
    "\x1b[36m(TaskRunner pid=9323)\x1b[0m validation generation end",
    "Training Progress:  12%|\u2588\u258f        | 1200/10000 [3:02:11<22:14:05,  9.10s/it]",
    "(WorkerDict pid=4243) [2026-07-06 22:31:07] actor update, micro batch 4/4, global_step: 12",
    "2026-07-06 22:31:07,552\tWARNING utils.py:458 -- Detecting docker specified CPUs.",
    "(TaskRunner pid=9323) list(reward_extra_infos_dict.keys())=['acc', 'format']",
    "",
)
KEYS = ("critic/score/mean", "critic/rewards/mean", "actor/entropy", "actor/kl_loss", "actor/grad_norm",
        "actor/pg_clipfrac", "response_length/mean", "response_length/clip_ratio", "actor/lr",
        "timing_s/step", "perf/throughput", "training/global_step")


def _logs(n: int, seed: int = 0) -> tuple[str, str]:
    """(console text, JSONL file-logger text) of the same ``n`` steps: a validation metric every 50 steps
    (another set of names on that line), a value printed as ``np.float64(...)``, a text value, a NaN, ANSI
    colour codes on some lines, CRLF line ends on others."""
    rng = np.random.default_rng(seed)
    con, jsn = [], []
    for s in range(1, n + 1):
        data = {k: float(v) for k, v in zip(KEYS, rng.normal(0.5, 0.3, len(KEYS)))}
        data["training/global_step"] = float(s)
        if s % 50 == 0:
            data["val-core/openai/gsm8k/reward/mean@1"] = float(rng.uniform())
        shown = {k: repr(v) for k, v in data.items()}
        if s % 97 == 0:
            shown["actor/entropy"] = f"np.float64({data['actor/entropy']!r})"
        if s % 301 == 0:
            data["actor/lr"] = shown["actor/lr"] = "warmup"
        if s % 613 == 0:
            data["actor/grad_norm"], shown["actor/grad_norm"] = float("nan"), "nan"
        prefix = "\x1b[36m(TaskRunner pid=9323)\x1b[0m " if s % 3 == 0 else "(TaskRunner pid=9323) "
        end = "\r\n" if s % 7 == 0 else "\n"
        con.append(prefix + f"step:{s} - " + " - ".join(f"{k}:{v}" for k, v in shown.items()) + end)
        con.append("\n".join(NOISE[: 1 + s % len(NOISE)]) + "\n")
        jsn.append(json.dumps({"step": s, "data": data}) + "\n")
    return "".join(con), "".join(jsn)


def _read(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = read_logs(path)
    assert len(runs) == 1
    return runs[0]


def test_console_log_among_noise_reads_as_its_jsonl_version(tmp_path):
    n = _FLOAT_BLOCK + 1500  # more rows than one float block
    console, jsonl = _logs(n)
    (tmp_path / "c").mkdir()
    (tmp_path / "j").mkdir()
    (tmp_path / "c" / "run.log").write_text(console)
    (tmp_path / "j" / "run.jsonl").write_text(jsonl)
    c, j = _read(tmp_path / "c" / "run.log"), _read(tmp_path / "j" / "run.jsonl")
    assert (c.format, j.format) == ("verl_console", "verl_jsonl")
    np.testing.assert_array_equal(c.steps, np.arange(1, n + 1))
    np.testing.assert_array_equal(c.steps, j.steps)
    assert list(c.columns) == list(j.columns)
    for k in c.columns:
        np.testing.assert_array_equal(c.columns[k], j.columns[k], err_msg=k)
    assert np.count_nonzero(np.isfinite(c.columns["eval_reward"])) == n // 50
    assert c.meta["non_numeric_values"] == j.meta["non_numeric_values"] == {"actor/lr": n // 301}
    assert c.meta["nan_counts"] == j.meta["nan_counts"]
    assert c.meta["mapping"] == j.meta["mapping"]


def _table(rows, how: str):
    tb = TableBuilder("rows")
    for i, (step, keys, vals) in enumerate(rows):
        if how == "text" or (how == "mixed" and i % 5 == 0):
            tb.add_kv(step, keys, vals)
        else:
            tb.add_text_kv(step, keys, vals)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tb.finish_runs(name="r", format="verl_console")


@pytest.mark.parametrize("how", ["floats", "mixed"])
def test_rows_kept_as_floats_give_the_table_of_rows_kept_as_text(how):
    """Signatures interleaved, a name twice in a row, text and NaN among numbers, resumed (re-logged) steps,
    a restart of the step counter: the table is the one the row-by-row text path gives."""
    rnd = random.Random(3)
    sigs = [("reward", "entropy", "kl"), ("reward", "entropy", "kl", "val/score"), ("reward", "kl", "kl")]
    rows, step = [], 0
    for i in range(2 * _FLOAT_BLOCK + 700):
        step = 1 if i == _FLOAT_BLOCK + 100 else (step - 3 if i % 997 == 0 and step > 5 else step + 1)
        keys = sigs[0] if rnd.random() < 0.8 else rnd.choice(sigs)
        vals = tuple(rnd.choice(["abc", "nan", " 1e-3", "inf"]) if rnd.random() < 0.01 else repr(rnd.gauss(0, 1))
                     for _ in keys)
        rows.append((step, keys, vals))
    want, got = _table(rows, "text"), _table(rows, how)
    assert [r.name for r in got] == [r.name for r in want] and len(want) == 2
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.steps, b.steps)
        assert list(a.columns) == list(b.columns)
        for k in a.columns:
            np.testing.assert_array_equal(a.columns[k], b.columns[k], err_msg=k)
        assert a.meta == b.meta


def test_step_lines_are_the_whole_text_regex_matches():
    pieces = ["step:1 - a:0.5 - b:1\n", "x step:2 - a:0.1\n", "\x1b[36m(T)\x1b[0mstep:3 - a:1\r\n", "xstep:4 - a:1\n",
              "global_step:5 - a:1\n", "noise with step: in it\n", "[r]step:6 - a:1 - step:7 - b:2\n", "step:8 - \n",
              "step:9 -  a:1\n", "\u2588 | 3/9 [00:01<00:02]\n", "\n", "step:10 - a:1", ")step:11 - a:1\n",
              ">step:12 - a:1\n", "\tstep:13 - a:1\n"]
    rnd = random.Random(0)
    for _ in range(300):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 15)))
        want = [(m.group(1), m.group(2)) for m in _STEP_LINE.finditer(text)]
        assert list(_step_lines(text)) == want, repr(text)


def _encoded_texts():
    """(name, bytes) of logs in every encoding read_text knows, with multi-byte characters and undecodable
    bytes next to line ends."""
    text = "step:1 - a:0.5\r\n\u2588\u258f \u00e9t\u00e9 | 3/9\nstep:2 - a:\U0001f600\n\n\u2028x\n" * 200 + "tail"
    bad = text.encode() + b"\xe2\x82\nstep:3 - a:1\n\xff\xfe\xf0\x9f\n\xc3"
    return [("plain.log", text.encode()), ("bom8.log", b"\xef\xbb\xbf" + text.encode()), ("bad.log", bad),
            ("nonl.log", b"step:1 - a:1 " * 50), ("empty.log", b""), ("bom16.log", text.encode("utf-16")),
            ("le16.log", ("step:1 - a:0.5\nnoise\n" * 300).encode("utf-16-le")), ("bom32.log", text.encode("utf-32")),
            ("gz.log", gzip.compress(bad))]


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 64, 1 << 20])
def test_text_pieces_join_to_the_text(tmp_path, piece):
    for name, raw in _encoded_texts():
        p = tmp_path / name
        p.write_bytes(raw)
        pieces = list(iter_text(str(p), piece))
        assert "".join(pieces) == read_text(str(p)), name
        assert all(x.endswith("\n") for x in pieces[:-1]), name
        if name.endswith(("16.log", "32.log")) or piece == 1 << 20 or name in ("nonl.log", "empty.log"):
            assert len(pieces) <= 1, name
        else:  # (the first piece holds the 4096 bytes that tell the encoding)
            assert len(pieces) > len(raw) // max(piece, 300) // 2, name


@pytest.mark.parametrize("piece", [5, 300, 4096])
def test_verl_log_read_in_pieces_is_read_as_its_whole_text(tmp_path, monkeypatch, piece):
    console, _ = _logs(400, seed=1)
    head = "(TaskRunner pid=1) {'actor_rollout_ref': {'rollout': {'n': 6}}, 'algorithm': {'adv_estimator': 'grpo'}}\n"
    p = tmp_path / "run.log"
    p.write_text(head + console)
    monkeypatch.setattr(_text, "TEXT_PIECE", piece)
    got = _read(p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = read_verl_console(str(p), text=head + console)[0]
    assert len(list(iter_text(str(p)))) > 1 or piece == 4096
    np.testing.assert_array_equal(got.steps, want.steps)
    assert list(got.columns) == list(want.columns)
    for k in got.columns:
        np.testing.assert_array_equal(got.columns[k], want.columns[k], err_msg=k)
    assert got.meta["group_size"] == want.meta["group_size"] == 6
    assert {k: v for k, v in got.meta.items() if k != "read"} == {k: v for k, v in want.meta.items() if k != "read"}


def test_verl_log_with_a_trl_entry_is_still_refused_with_its_line(tmp_path, monkeypatch):
    console, _ = _logs(300, seed=2)
    lines = console.splitlines(keepends=True)
    lines.insert(500, "{'loss': 0.1, 'reward': 0.5, 'epoch': 0.2}\n")
    p = tmp_path / "mixed.log"
    p.write_text("".join(lines))
    monkeypatch.setattr(_text, "TEXT_PIECE", 64)
    with pytest.raises(LogFormatError, match="mixes two log formats") as e:
        read_logs(p)
    assert "1 trl_console entries (first at line 501)" in str(e.value)
    with pytest.warns(LogWarning, match="read as verl_console as asked"):
        run = read_logs(p, format="verl_console")[0]
    assert run.steps.size == 300


def test_blank_verl_log_is_an_empty_file(tmp_path):
    p = tmp_path / "blank.log"
    p.write_text(" \n\n\t\n")
    with pytest.raises(LogFormatError, match="empty file"):
        read_verl_console(str(p))


def test_holds_any_is_any_needle_in_the_bytes():
    rnd = random.Random(5)
    alphabet = "ab'=_r\u00e9\n"
    needles = ("'r'", "a=", "'b_", "rab=", "=", "r_'")
    for _ in range(3000):
        raw = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14))).encode()
        ns = rnd.sample(needles, rnd.randint(1, 3))
        assert holds_any(raw, ns) == any(n.encode() in raw for n in ns), (raw, ns)


def test_verl_log_with_an_openrlhf_bar_is_refused(tmp_path, monkeypatch):
    console, _ = _logs(200, seed=4)
    lines = console.splitlines(keepends=True)
    bar = "Train epoch [1/1]:  10%|\u2588 | 10/100 [00:10<01:30, 1.00s/it, policy_loss=0.1, reward=0.5]\n"
    lines.insert(300, bar)
    p = tmp_path / "mixed.log"
    p.write_text("".join(lines))
    monkeypatch.setattr(_text, "TEXT_PIECE", 256)
    with pytest.raises(LogFormatError, match=r"and 1 openrlhf_console entries \(first at line 301\)"):
        read_logs(p)
