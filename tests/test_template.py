"""kvkb.template: splitting, checks, extraction, and that extraction stays fast on hostile input."""

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvkb import template

KV_TEMPLATE = (
    "To serve at least one request with the model's max seq len ({max_model_len}), ({needed_gib} GiB KV cache "
    "is needed, which is larger than the available KV cache memory ({available_gib} GiB). Based on the available "
    "memory, the estimated maximum model length is {estimated_max_len}."
)
KV_LINE = (
    "ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed, "
    "which is larger than the available KV cache memory (5.62 GiB). Based on the available memory, the estimated "
    "maximum model length is 46000. Try increasing `gpu_memory_utilization`."
)


def test_split_unescapes_braces_and_merges_literals():
    assert template.split("a {x} {{b}} c") == [("lit", "a "), ("ph", "x"), ("lit", " {b} c")]


@pytest.mark.parametrize("bad", ["len ({Max})", "len ({x)", "len (x}", "{1st} value here"])
def test_split_rejects_stray_braces(bad):
    with pytest.raises(template.TemplateError, match="stray"):
        template.split(bad)


def test_extract_real_line():
    assert template.extract(KV_TEMPLATE, KV_LINE) == {
        "max_model_len": "131072",
        "needed_gib": "16.0",
        "available_gib": "5.62",
        "estimated_max_len": "46000",
    }


def test_extract_tolerates_rewrapped_whitespace():
    wrapped = KV_LINE.replace(" KV cache is", "\n   KV  cache is")
    assert template.extract(KV_TEMPLATE, wrapped)["needed_gib"] == "16.0"


def test_extract_none_when_literal_differs():
    assert template.extract(KV_TEMPLATE, KV_LINE.replace("model's", "models's")) is None


def test_leading_placeholder_takes_one_token_not_the_log_prefix():
    line = "WARNING 11-20 10:12:01 [scheduler.py:1560] 5 requests preempted"
    assert template.extract("{n} requests preempted", line) == {"n": "5"}


def test_trailing_placeholder_takes_one_token():
    got = template.extract("estimated maximum model length is {n}", "estimated maximum model length is 1792. Try x")
    assert got == {"n": "1792."}


def test_repeated_placeholder_must_repeat_the_value():
    tpl = "requested {x} GiB but only {x} GiB fit"
    assert template.extract(tpl, "requested 4 GiB but only 4 GiB fit") == {"x": "4"}
    assert template.extract(tpl, "requested 4 GiB but only 3 GiB fit") is None


def test_extract_of_malformed_template_is_none_not_an_exception():
    assert template.extract("broken {template", "broken {template") is None


def test_check_flags_adjacent_and_whitespace_separated_placeholders():
    assert [c for c, _ in template.check("max seq len ({a}{b}) is too long")] == ["KB041"]
    assert [c for c, _ in template.check("max seq len ({a} {b}) is too long")] == ["KB041"]
    assert template.check(KV_TEMPLATE) == []


def test_check_needs_an_anchor_literal():
    assert [c for c, _ in template.check("{a} of {b}")] == ["KB040"]


def test_check_reports_stray_brace_as_kb040():
    (code, msg), = template.check("max seq len ({a) is too long")
    assert code == "KB040" and "column 14" in msg


def test_placeholders_in_order_without_duplicates_or_escapes():
    assert template.placeholders("{b} and {a} and {b} {{c}}") == ["b", "a"]
    # a Python dict in a fix form is not a template: only well-formed names count
    assert template.placeholders('LLM(model=MODEL, hf_overrides={"x": 1}, max_model_len={max_model_len_fit})') == [
        "max_model_len_fit"
    ]


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def test_no_catastrophic_backtracking_on_repeated_literals():
    # a long line that repeats the template's literals but never completes it: the old lazy regex took
    # minutes on 40 kB; the atomic, bounded one is linear
    unit = ("To serve at least one request with the model's max seq len (1), (x GiB KV cache is needed, "
            "which is larger than the available KV cache memory (")
    for line in (unit * 2000, "To serve at least one request with the model's max seq len (" + "), (" * 20000):
        assert _timed(lambda: template.extract(KV_TEMPLATE, line)) < 2.0


def test_leading_placeholder_on_a_huge_token_is_linear():
    assert _timed(lambda: template.extract("{n} requests preempted", "x" * 200_000)) < 1.0


def test_to_regex_pattern_round_trips_through_re_compile():
    # the matcher stores .pattern in a JSON index and recompiles it
    rx = re.compile(template.to_regex(KV_TEMPLATE).pattern)
    assert rx.search(KV_LINE).group("available_gib") == "5.62"


words = st.text(alphabet="abcdefghij ().,:", min_size=1, max_size=12).filter(lambda s: s.strip())
values = st.from_regex(r"[0-9][0-9.]{0,8}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(words, values), min_size=1, max_size=4), st.text(alphabet="xyz ", max_size=20))
def test_extract_recovers_what_was_filled_in(pieces, prefix):
    # build "lit0{p0}lit1{p1}...END" with literals that cannot occur inside the numeric values
    tpl = "".join(f"{lit} {{p{i}}} " for i, (lit, _) in enumerate(pieces)) + "end of the message"
    line = prefix + "".join(f"{lit} {val} " for lit, val in pieces) + "end of the message"
    got = template.extract(tpl, line)
    assert got == {f"p{i}": val for i, (_, val) in enumerate(pieces)}
