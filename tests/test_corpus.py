"""kbmatch on the real-paste corpus (tests/corpus): the goals of issue 18 on the aggregate.

Evident positives get the right entry confidently (>= 95%), cut positives at least as likely
(>= 50%), negatives and uncovered errors a wrong confident claim at most 2% of the time. An evident
PyTorch OOM line whose paste shows no stage is held to "at least likely" (>= 80%): with no stage in
view no answer may be confident (corpus_report.STAGE_SPLIT).
`python -m tests.corpus_report` prints the same scores per kind and per entry.
"""

from __future__ import annotations

import json

import pytest

import corpus_report
from matcher_helpers import entry_ids, matcher

CASES = corpus_report.cases() if corpus_report.CORPUS.is_dir() else []


@pytest.fixture(scope="module")
def rows():
    if not CASES:
        pytest.skip("no labelled corpus in tests/corpus")
    return corpus_report.score(matcher())


def test_corpus_meets_the_goals(rows):
    bad = corpus_report.failures(rows)
    assert not bad, "\n" + corpus_report.report(rows, misses=True)


def test_a_dressed_paste_keeps_its_right_answer():
    # the same real paste flattened onto one line, behind a launcher's prefix, or quoted in prose
    if not CASES:
        pytest.skip("no labelled corpus in tests/corpus")
    kept = corpus_report.dress_rows(matcher())
    bad = {name: (k, n, lost) for name, (k, n, lost) in kept.items() if n and k / n < corpus_report.DRESSES[name][1]}
    assert not bad, bad


def test_a_dressed_negative_gains_no_wrong_claim():
    # a negative or uncovered error dressed the same ways (a dress that names vLLM itself left out)
    if not CASES:
        pytest.skip("no labelled corpus in tests/corpus")
    got = corpus_report.dress_wrong_rows(matcher())
    assert got and all(n for _, n, _ in got.values())
    bad = {name: (k, n, files) for name, (k, n, files) in got.items() if k > corpus_report.DRESS_WRONG * n}
    assert not bad, bad


def test_every_label_is_well_formed():
    known = entry_ids()
    seen = set()
    for case in CASES:
        assert case["file"] not in seen, f"{case['file']} is labelled twice"
        seen.add(case["file"])
        assert isinstance(case.get("evident"), bool), case["file"]
        # a stage-split OOM line says whether the paste shows its stage; no other label carries the field
        if corpus_report.needs_stage_label(case):
            assert isinstance(case.get("stage_shown"), bool), f"{case['file']}: say whether the stage is shown"
        else:
            assert "stage_shown" not in case, f"{case['file']}: stage_shown is only for stage-split OOM lines"
        assert case["source"].startswith(("https://", "http://")), case["file"]  # a few pages are served over http only
        if case["kind"] == "positive":
            assert case["accept"], f"{case['file']}: a positive names the entries that are right"
        # an accepted id that is no entry (yet) can never be matched: say so rather than score it as a miss
        unknown = set(case["accept"]) - known
        assert not unknown or case["kind"] != "positive" or len(unknown) < len(case["accept"]), \
            f"{case['file']}: accepts only ids that are not entries: {sorted(unknown)}"


def test_judging_rules():
    pos = {"kind": "positive", "evident": True, "accept": ["a"]}
    assert corpus_report.judge(pos, "a", "a")[1]
    assert not corpus_report.judge(pos, None, "a")[1]  # evident: likely is not enough
    cut = dict(pos, evident=False)
    assert corpus_report.judge(cut, None, "a")[1]
    assert not corpus_report.judge(cut, None, "b")[1]
    # a stage-split OOM line with no stage in the paste: likely is the right answer, and enough
    split = {"kind": "positive", "evident": True, "accept": ["cuda-oom-during-startup"], "stage_shown": False}
    assert corpus_report.judge(split, None, "cuda-oom-during-startup") == ("nostage", True, "cuda-oom-during-startup")
    assert not corpus_report.judge(split, None, None)[1]
    assert corpus_report.judge(dict(split, stage_shown=True), None, "cuda-oom-during-startup")[:2] == ("evident", False)
    neg = {"kind": "negative", "evident": True, "accept": []}
    assert corpus_report.judge(neg, None, "x")[1]  # a likely claim is no wrong confident one
    assert not corpus_report.judge(neg, "x", "x")[1]
    assert corpus_report.judge(dict(neg, accept=["x"]), "x", "x")[1]


def test_failures_name_the_missed_goal():
    rows = [{"group": "evident", "ok": False}] + [{"group": "evident", "ok": True}] * 9
    assert corpus_report.failures(rows) == ["evident: 9/10 = 90.0%, goal at least 95%"]
    rows = [{"group": "wrong", "ok": True}] * 99 + [{"group": "wrong", "ok": False}]
    assert corpus_report.failures(rows) == []


def test_a_label_for_a_missing_paste_is_an_error(tmp_path):
    (tmp_path / "pastes").mkdir()
    (tmp_path / "labels-x.json").write_text(json.dumps([{"file": "nope.txt", "kind": "positive", "accept": ["a"]}]))
    with pytest.raises(ValueError, match="nope.txt"):
        corpus_report.cases(tmp_path)
