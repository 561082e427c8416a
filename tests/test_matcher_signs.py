"""A cause's signs (kb causes[].signs) choose which fix kbmatch shows: the first cause, in the entry's
rank order, whose sign the log holds; the top cause's fix otherwise; and the answer says which sign."""

from __future__ import annotations

from kvkb.matcher.engine import Matcher

from matcher_helpers import kb_entries, matcher

KILL = "Out of memory: Killed process 4242 (python3) total-vm:91234567kB, anon-rss:60123456kB, file-rss:0kB\n"


def _entry(eid):
    return next(e for e in kb_entries() if e.id == eid)


def _first(text: str):
    return matcher().match(text.encode()).matches[0]


def test_no_sign_keeps_the_top_cause_fix():
    m = _first(KILL)
    assert m.id == "host-oom-killer"
    assert m.fix_title == _entry("host-oom-killer").top_fix.title and "cause" not in m.notes


def test_a_sign_in_the_log_chooses_its_cause_fix_and_says_so():
    entry = _entry("host-oom-killer")
    container = next(c for c in entry.causes if "OOMKilled" in c.signs)
    m = _first("vllm-0    0/1     OOMKilled   3          10m\n" + KILL)
    assert m.id == "host-oom-killer"
    assert m.fix_title == container.fixes[0].title
    assert "'OOMKilled' (line 1)" in m.notes["cause"] and container.title in m.notes["cause"]


def test_the_higher_ranked_cause_wins_when_both_show():
    entry = _entry("host-oom-killer")
    offload = next(c for c in entry.causes if "'cpu_offload_gb'" in c.signs)
    assert entry.causes.index(offload) < next(i for i, c in enumerate(entry.causes) if "OOMKilled" in c.signs)
    text = "INFO 11-20 10:11:05 [utils.py:233] non-default args: {'model': 'x', 'cpu_offload_gb': 40}\n" \
           "vllm-0    0/1     OOMKilled   3          10m\n" + KILL
    m = _first(text)
    assert m.fix_title == offload.fixes[0].title and "'cpu_offload_gb'" in m.notes["cause"]


def test_no_sign_is_in_every_wording_of_its_entry():
    # a sign in each of the entry's own error texts would be in every log of it: it could not tell causes
    # apart (one wording among several may be a sign: the cgroup form of the kernel's kill line)
    for entry in kb_entries():
        texts = [s.template for s in entry.signatures]
        for cause in entry.causes:
            for sign in cause.signs:
                assert not all(sign in t for t in texts), (entry.id, cause.id, sign)


def test_signs_reach_the_index_in_rank_order():
    m = Matcher.from_entries([_entry("host-oom-killer")])
    signed = m.entries[0]["signed"]
    causes = [c.title for c in _entry("host-oom-killer").causes if c.signs]
    assert [c["cause"] for c in signed] == causes and all(c["signs"] for c in signed)
