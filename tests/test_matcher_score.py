"""kvkb.matcher.score: exact template matches, literal numbers, the fuzzy fallback."""

import pytest

from kvkb import template
from kvkb.matcher.engine import Matcher
from kvkb.matcher.normalize import normalise
from kvkb.matcher.literal import exact, literal_form, walk
from matcher_helpers import kb_entries

SIG_SAMPLES = [(sig.template, s) for e in kb_entries() for sig in e.signatures for s in sig.samples]


def form(tpl: str) -> dict:
    return literal_form(template.split(tpl))


@pytest.mark.parametrize("tpl,sample", SIG_SAMPLES, ids=[f"s{i}" for i in range(len(SIG_SAMPLES))])
def test_exact_agrees_with_the_template_regex_on_every_kb_sample(tpl, sample):
    # kvkb lint proves each sample matches its template's regex; exact() is the same test without the regex
    assert template.extract(tpl, sample) is not None
    assert exact(sample, form(tpl))


@pytest.mark.parametrize("tpl,line,expected", [
    ("Sequence group {id} is preempted by {mode} mode because", "Sequence group chatcmpl-5f0c is preempted by X mode because", True),
    ("Sequence group {id} is preempted by {mode} mode because", "Sequence group is preempted by X mode because", False),  # empty value
    ("usage: 100.0%", "GPU KV cache usage: 41.3%, hit rate", False),
    ("usage: 100.0%", "GPU KV cache   usage:\t100.0%, hit rate", True),  # whitespace is flexible
    ("{name} is not supported here", "x is not supported here", True),
    ("{name} is not supported here", " is not supported here", False),  # a leading placeholder needs its token
    ("size is {n}", "size is ", False),  # ... and a trailing one
    ("a {x} bb {y} cc", "a 1 bb 2 c", False),
    ("a {x} bb {y} cc", "zz a bb a 1 bb 2 cc", True),  # a later occurrence of the first literal is tried
])
def test_exact(tpl, line, expected):
    assert exact(line, form(tpl)) is expected
    assert (template.extract(tpl, line) is not None) is expected


def test_literal_form_keeps_literal_numbers_only():
    f = form("Running: {running} reqs, GPU KV cache usage: 100.0% in v1 (at least 1) of {n}")
    assert f["nums"] == [1.0, 100.0]
    assert f["lits"] == ["Running: ", " reqs, GPU KV cache usage: 100.0% in v1 (at least 1) of "]
    assert f["gaps"] == [[], ["running"], ["n"]]


@pytest.mark.parametrize("tpl,sample", SIG_SAMPLES, ids=[f"s{i}" for i in range(len(SIG_SAMPLES))])
def test_walk_extracts_what_the_template_regex_extracts(tpl, sample):
    values, whole = walk(sample, form(tpl))
    assert whole
    assert values == {k: " ".join(v.split()) for k, v in template.extract(tpl, sample).items()}


def test_walk_on_a_cut_line_keeps_the_values_found():
    tpl = "max seq len ({max_model_len}) is larger than the KV cache ({kv_tokens}). Try increasing"
    assert walk("The max seq len (30000) is larger than the KV cache (3984", form(tpl)) == ({"max_model_len": "30000", "kv_tokens": "3984"}, False)
    assert walk("The max seq len (30000) is lar", form(tpl)) == ({"max_model_len": "30000)"}, False)


def _matcher(*templates: tuple[str, str, str | None, str]) -> Matcher:
    """A Matcher over hand-written signatures: (entry id, template, exception, filled instance)."""
    entries, sigs = [], []
    for eid, tpl, exc, instance in templates:
        entries.append({"id": eid, "title": eid, "summary": "", "severity": "warning", "category": "capacity",
                        "phase": "serving", "tags": [], "cause": "",
                        "fix": {"id": "f", "title": "t", "cli": None, "python": None, "env": None, "versions": "", "status": "unverified"}})
        sigs.append({"entry": len(entries) - 1, "id": "s", "exception": exc, "level": None if exc else "INFO",
                     "versions": ">=0.1", "engine": "v1", "backend": "any", "norm": normalise(instance),
                     "norm_raw": normalise(instance, canon=False)} | form(tpl))
    return Matcher({"entries": entries, "signatures": sigs})


FULL = _matcher(("cache-full", "Waiting: {waiting} reqs, Widget cache usage: 100.0%", None, "Waiting: 3 reqs, Widget cache usage: 100.0%"))


def test_a_number_written_in_the_template_is_not_a_wildcard():
    healthy = "INFO 11-20 10:15:31 [loggers.py:1] Running: 2 reqs, Waiting: 0 reqs, Widget cache usage: 41.3%, rate: 0.0%\n"
    report = FULL.match(healthy)
    assert report.root_cause is None and report.matches == []
    full = healthy.replace("41.3%", "100.0%")
    assert FULL.match(full).root_cause == "cache-full"
    # the line that matters comes after a healthy one that masks to the same text: it is not deduplicated away
    assert FULL.match(healthy + full).root_cause == "cache-full"


def test_an_info_signature_matches_its_own_wording_only():
    """INFO lines are vLLM's own text and healthy stats lines all look alike: one word off is no
    match at all (a fuzzy score let healthy "Waiting: 35 reqs, ... usage: 36.9%" lines claim preemption)."""
    exact = "INFO 11-20 10:15:31 [loggers.py:1] Waiting: 4 reqs, Widget cache usage: 100.0%\n"
    assert FULL.match(exact).root_cause == "cache-full"
    near = exact.replace("usage", "use")
    assert FULL.match(near).matches == []
    assert FULL.match(near.replace("100.0%", "99.0%")).matches == []


def test_exact_wording_wins_over_a_longer_template_that_contains_the_line():
    m = _matcher(
        ("a", "No available memory for the cache blocks. Try increasing it. See {url} for more.", "ValueError",
         "No available memory for the cache blocks. Try increasing it. See https://x.y/z for more."),
    )
    m.table.sigs.append(m.table.sigs[0] | {"id": "short", "norm": normalise("No available memory for the cache blocks. Try increasing it."),
                                           **form("No available memory for the cache blocks. Try increasing it.")})
    m.table = type(m.table)(m.table.sigs)
    top = m.match("ValueError: No available memory for the cache blocks. Try increasing it.\n").matches[0]
    assert top.confident and top.signature["id"] == "short"


# --- the words that carry a memory error's meaning (issue 18) ---------------------------------------


def test_meaning_words_must_agree():
    from kvkb.matcher.score import meaning, meaning_differs

    assert meaning("cuda out of memory. tried") == (frozenset({"cuda"}), frozenset(), True)
    oom = {"norm": "cuda driver error: out of memory", "devices": ["cuda"], "spaces": []}
    assert meaning_differs("cuda driver error: out of memory", oom) is None
    assert "memory ran out" in meaning_differs("cuda driver error: the operation cannot be performed in the present state", oom)
    hbm = {"norm": "ran out of memory in memory space hbm", "devices": [], "spaces": ["hbm"]}
    assert "smem" in meaning_differs("ran out of memory in memory space smem", hbm)
    onchip = dict(hbm, spaces=["smem", "vmem"])
    assert meaning_differs("ran out of memory in memory space vmem", onchip) is None
    xpu = {"norm": "xpu out of memory", "devices": ["xpu"], "spaces": []}
    assert meaning_differs("npu out of memory", xpu)
    # a capacity message that mentions CUDA graphs names no device that ran out
    mamba = {"norm": "max_num_seqs exceeds mamba cache blocks so cuda graph capture cannot proceed", "devices": ["cuda"], "spaces": []}
    assert meaning_differs("max_num_seqs (<n>) exceeds available mamba cache blocks (<n>).", mamba) is None
    # an allocator's refusal says memory ran short; a runtime's invalid argument about memory does not
    el0004 = {"norm": "el0004: [pid: <n>] <n>-<n>-<n>-<n>:<n>:<n>.127 failed to allocate memory.", "devices": [], "spaces": []}
    assert meaning_differs("el0004: [pid: <n>] <n>-<n>-<n>-<n>:<n>:<n>.655 failed to allocate memory.", el0004) is None
    assert "memory ran out" in meaning_differs(
        "ee1001: [pid: <n>] <n>-<n>-<n>-<n>:<n>:<n>.114 the argument is invalid.reason: memory async failed", el0004)


def test_a_sentence_that_reports_no_failure_is_not_a_failure_wording():
    # a person telling what a program does ("it allocates memory for the KV cache") is not the
    # warning that it failed to ("Failed to allocate memory for the KV cache")
    from matcher_helpers import matcher

    prose = ("Basically, when the server warms up the model it allocates memory for the KV cache so, those 67 GB "
             "are coming from the 14GB of weights and the remaining are the GB allocated for KV Cache.\n")
    report = matcher().match(prose)
    assert report.root_cause is None
    assert "lmcache-cpu-buffer-full" not in [m.id for m in report.matches if m.confidence != "possible"]
    # the same wording with its failure words is the error; a line cut before them is not judged so
    assert matcher().match("[2025-06-01 10:00:00,123] LMCache WARNING: Failed to allocate memory for the KV cache. "
                           "The KV cache will not be stored. (cache_engine.py:144:lmcache)\n").root_cause \
        == "lmcache-cpu-buffer-full"
    from kvkb.matcher.score import meaning_differs
    sig = {"norm": "free memory on device (<n>/<n> gib) on startup is less than desired gpu memory utilization (<n>, <n> gib)."}
    assert meaning_differs("free memory on device (<n>/<n> gib) on startup.", sig) is None


def test_a_close_text_about_another_subject_is_not_the_error():
    # "DeepGEMM backend is not available" scores close to "UVA is not available"; the word that says
    # what is not available (a word few entries' wordings use) is missing
    from kvkb.matcher.score import meaning_differs
    from matcher_helpers import matcher

    uva = next(sg for sg in matcher().table.sigs if sg["norm"] == "uva is not available")
    assert uva["keys"] == ["uva"]
    assert "uva" in meaning_differs("deepgemm backend is not available or outdated.", uva)
    assert meaning_differs("uva is not available.", uva) is None
    # a line shorter than the wording may be it cut before its subject: not judged on that
    kv = {"norm": "to serve at least one request with the models max seq len (<n>), (<n> gib kv cache is needed",
          "keys": ["least", "request", "serve"]}
    assert meaning_differs("<n> gib kv cache is needed", kv) is None
    report = matcher().match("RuntimeError: DeepGEMM backend is not available or outdated.\n")
    assert report.root_cause is None and not [m for m in report.matches if m.confidence != "possible"]
    assert matcher().match("RuntimeError: UVA is not available\n").root_cause == "cpu-offload-requires-pinned-memory"


def test_a_cut_wrapper_line_below_an_error_no_entry_claims_is_only_possible():
    from matcher_helpers import matcher

    tb = ("(EngineCore pid=1) ERROR [core.py:1136] EngineCore failed to start.\n"
          "RuntimeError: DeepGEMM backend is not available or outdated.\n\n"
          "RuntimeError: Engine core initialization failed. S")
    assert [m.id for m in matcher().match(tb).matches if m.confidence != "possible"] == []
    # the wrapper cut alone (nothing above it) is still the wrapper's entry, likely
    alone = "RuntimeError: Engine core initialization failed. See root c"
    assert [m.id for m in matcher().match(alone).matches if m.confidence == "likely"] == ["engine-dead-after-oom"]


def test_says_failure_reads_the_words_of_a_failure_and_not_their_look_alikes():
    from kvkb.matcher.score import says_failure

    for said in ("failed to allocate", "couldn't start", "could not start", "the kv cache is full", "cuda oom",
                 "killed by sigbus", "too large for the gpu", "no free blocks left"):
        assert says_failure(said), said
    # "oom" inside a word ("room", "zoom") and "sig" with no letter after it report nothing
    for said in ("it allocates memory for the kv cache", "leave room for the zoom view", "sig 1 of 2"):
        assert not says_failure(said), said


def test_a_sentence_that_begins_as_the_wordings_and_goes_on_otherwise_is_another_message():
    from kvkb.matcher.score import goes_on_otherwise

    vllm = ("this model's maximum context length is <n> tokens. however, your prompt contains <n> input tokens, "
            "which exceeds this limit even without any output tokens.")
    openai = "this model's maximum context length is <n> tokens. however, your messages resulted in <n> tokens."
    assert goes_on_otherwise(openai, vllm) == ("however your messages", "however your prompt")
    # quotes, punctuation and a missing number are no other message
    assert goes_on_otherwise("x is <n>. try increasing 'gpu_memory_utilization' now", "x is <n>. try increasing `gpu_memory_utilization`") is None
    assert goes_on_otherwise("cuda out of memory. tried to allocate <n> mib. gpu has a total",
                             "cuda out of memory. tried to allocate <n> mib. gpu <n> has a total") is None
    # first sentences that differ: no sentence to compare after them
    assert goes_on_otherwise("another thing is <n>. however, your messages resulted", vllm) is None
    # a possessive dropped ("this model maximum") is still the same first sentence
    webui = "this model maximum context length is <n> tokens. however, your messages resulted in over <n> tokens."
    assert goes_on_otherwise(webui, vllm) == ("however your messages", "however your prompt")


def test_a_near_miss_of_vllms_context_length_wording_is_no_confident_claim():
    line = ("BadRequestError: Error code: 400 - {'error': {'message': \"This model's maximum context length is 4097 "
            "tokens. However, your messages resulted in 6988 tokens. Please reduce the length of the messages.\"}}")
    assert Matcher.from_entries(kb_entries()).match(line).confident == []


def _sig_of(entry: str, needle: str) -> dict:
    m = Matcher.load()
    return next(s for s in m.table.sigs if m.entries[s["entry"]]["id"] == entry and needle in s["norm"])


@pytest.mark.parametrize("text,expected", [
    # the opening sentence word for word, then the prose that followed it, flattened onto its line
    ("max_num_seqs (1024) exceeds available Mamba cache blocks (524) This caused the engine to fail", True),
    ("max_num_seqs (1024) exceeds available Mamba cache blocks (524). This caused the engine to fail", True),
    ("max_num_seqs (1024) exceeds available Mamba cache blocks (524). Each decode sequence requires one Mamba "
     "cache block, so CUDA graph capture cannot proceed. [rank0]: next line", True),
    # the same sentence going on in lower case: it may be another message in the same mould
    ("max_num_seqs (1024) exceeds available Mamba cache blocks (524) while capturing graphs", False),
    # the sentence not finished, or too little of the wording to tell
    ("max_num_seqs (1024) exceeds available Mamba cache Something else", False),
    ("max_num_seqs (1024) exceeds", False),
    # the wording does not open the text
    ("I wonder why max_num_seqs (1024) exceeds available Mamba cache blocks (524) This caused", False),
])
def test_leads_reads_a_wordings_opening_sentences_and_what_goes_on_after(text, expected):
    from kvkb.matcher.literal import leads

    assert leads(text, _sig_of("mamba-cache-blocks-below-max-num-seqs", "mamba cache blocks")) is expected


@pytest.mark.parametrize("entry,needle,text,expected", [
    # a wording of one literal, its first sentence kept and markdown after it
    ("no-memory-for-cache-blocks", "no available memory for the cache blocks. try",
     "No available memory for the cache blocks**: $ python -m vllm.entrypoints.openai.api_server --model m", True),
    ("no-memory-for-cache-blocks", "no available memory for the cache blocks. try",
     "No available memory for the cache blocks and then some", False),
    # pydantic's heading of a config validator's error, flattened onto the line with what followed
    ("max-num-batched-tokens-below-max-model-len", "is smaller than max_model_len",
     "1 validation error for SchedulerConfig Value error, max_num_batched_tokens (8192) is smaller than "
     "max_model_len (131072). ... Root cause chain: a later change", True),
    ("max-num-batched-tokens-below-max-model-len", "is smaller than max_model_len",
     "a long sentence written by a person, then max_num_batched_tokens (8192) is smaller than max_model_len (131072). So", False),
])
def test_leads_on_other_shapes(entry, needle, text, expected):
    from kvkb.matcher.literal import leads

    assert leads(text, _sig_of(entry, needle)) is expected


def test_a_flattened_error_running_on_into_prose_is_still_its_entry():
    text = ("The default configuration attempted to allocate: max_num_seqs=1024 which exceeded the available Mamba "
            "cache blocks during engine initialization: ValueError: max_num_seqs (1024) exceeds available Mamba "
            "cache blocks (524) This caused the engine to fail startup on 2x H100 80GB HBM3 systems.\n")
    r = Matcher.load().match(text)
    assert r.root_cause == "mamba-cache-blocks-below-max-num-seqs"
    # written the same way without the class, the sentence is a person's: no lead is read
    r = Matcher.load().match(text.replace("ValueError: ", ""))
    assert r.root_cause is None


def test_an_error_quoted_mid_line_is_scored_with_its_class_wordings():
    # XlaRuntimeError quoted inside a sentence gets RuntimeError's wordings, as at a line's start
    from kvkb.matcher.segment import segment

    text = ("Now it fails. jaxlib._jax.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out "
            "of memory in memory space vmem. Used 32.42M of 16.00M vmem. Exceeded vmem capacity by 16.42M.")
    m = Matcher.load()
    inner = [r for r in segment([(1, text)])[0] if r.kind == "inner"]
    assert inner and m.table.candidates(inner[0])[0] == m.table.by_type["RuntimeError"]


def test_a_long_lines_fuzzy_hit_is_judged_where_it_aligned():
    from kvkb.matcher.score import aligned_part, meaning_differs

    sig = _sig_of("lmcache-cpu-buffer-full", "failed to allocate memory")
    para = ("i think i found what is the problem. when the server warms up the model it allocates memory for the kv "
            "cache so, those 67 gb ram are coming from the 14gb of the weights and the rest is the kv cache; another "
            "server on that card later ran out of memory")
    part = aligned_part(para, sig["norm"])
    assert "allocates memory for the kv" in part and len(part) < len(para)
    # the paragraph says memory ran out (elsewhere), the part the wording aligned with does not
    assert meaning_differs(para, sig) is None
    assert meaning_differs(part, sig) is not None
    r = Matcher.load().match(para.replace("\n", " ") + "\n")
    assert r.root_cause is None
    # a line shorter than twice the wording is read whole
    assert aligned_part("failed to allocate memory for the kv cache.", sig["norm"]) == "failed to allocate memory for the kv cache."


def test_a_line_long_enough_to_reach_the_wordings_failure_words_must_say_one():
    from kvkb.matcher.score import failure_reach, meaning_differs

    sig = _sig_of("insufficient-free-memory-at-startup", "on startup is less than desired gpu memory utilization (")
    assert failure_reach(sig["norm"]) == sig["norm"].index("less than") + len("less than")
    # a healthy line in the same mould, past where the wording says "less than": no failure said
    healthy = ("free memory on device (<n>/<n> gib) on startup. desired gpu memory utilization is (<n>, <n> gib). "
               "actual usage is <n> gib for weights")
    assert meaning_differs(healthy, sig) == "it does not say that anything failed"
    # the wording cut before its failure words may still be it
    assert meaning_differs("free memory on device (<n>/<n> gib) on startup", sig) is None
