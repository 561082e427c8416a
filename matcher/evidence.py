"""What a log states around (or instead of) its error: start-ups, stage milestones, numbers, frames.

Pure: parsed lines in (segment.parse), facts out. A paste cut before its exception line still says
a lot: `# GPU blocks: 0`, `Available KV cache memory: -3.75 GiB`, `Maximum concurrency ...: 0.00x`,
a traceback whose deepest frame is `check_enough_kv_cache_memory` or `wake_up`, the `raise` line vLLM
printed inside a frame. `Scanner` reads those facts in log order (one pass, windows of a big log fed
one after another); `hints()` turns them into ranked "likely" / "possible" entry ids, each with the
lines that support it. Every rule is about how vLLM works (its start-up order and its KV arithmetic),
never about a particular paste.

A cut paste is read from what it does show: the deepest vLLM function (frames, calls on source lines,
`_run_workers("init_cache_engine")`, a worker's "while processing method X", flattened and IPython
tracebacks) and what its callees can raise (callees.json); else the last start-up step the timeline
reached and what vLLM runs next (phase_hints); the accelerator the log names (its OOM entry replaces
CUDA's: a platform line, a plugin's files, a launcher's tag such as `intel-gpu-vllm  |`, or for 'likely'
answers the source tree a platform's container image installs); what cannot end a traceback is left
out of a callee table (a logged warning; below a vllm/v1/ frame, a V0-only entry); PyTorch moving a
module onto the device (Module.to), vLLM's model code and a constructor the KB names as a raise site
are read as the cut frame; INFO/WARNING lines that are the evidence (a full KV cache, a 64 MB
/dev/shm under tensor parallelism, a failed cudaHostRegister); and the person's own words (OOM + the step or device they
name, "killed" + memory, "insufficient KV cache memory"). All of it is "likely" at most, and none of it
counts where an error line names another cause.
"""

from __future__ import annotations

from .regex_cache import Lazy, compile as _rx

from .normalize import to_number
from .segment import _FRAME_RE, _PATH_CUES, _exception, MILESTONE_WORDS, MILESTONES, cues_of, frame_cues, stage

# --- start-ups and milestones ------------------------------------------------------------------

# One line per start-up, per kind: the API server prints its version, then the engine its config.
# A kind seen again within the same start-up begins the next one (a crash loop, a restart).
_STARTUP = (
    ("server", "vLLM API server version"),
    ("engine", "Initializing a V1 LLM engine"),
    ("engine", "Initializing an LLM engine"),
)

# --- numbers -------------------------------------------------------------------------------------

# (name, gate substring, regex with one group per value, unit scale to GiB or None)
_NUMBERS = (
    ("available_kv_gib", "Available KV cache memory", r"Available KV cache memory: (-?[\d.]+) ?GiB"),
    ("available_kv_gib", "reserved for KV Cache is", r"reserved for KV Cache is (-?[\d.]+) ?GiB"),
    # vLLM's "# GPU blocks: 0", and a person's "I got GPU blocks 0"
    ("device_blocks", " blocks", r"(?:# )?(?:GPU|cuda|CUDA|NPU|npu|XPU|xpu|HPU|hpu|TPU|tpu) blocks(?::| =|) (-?\d+)\b"),
    ("available_bytes", "Available memory: ", r"Available memory: (-?\d+)\b"),
    ("kv_tokens", "KV cache size: ", r"(?:GPU|CPU|NPU|XPU|TPU|HPU) KV cache size: ([\d,]+) tokens"),
    ("concurrency", "Maximum concurrency for", r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x"),
    ("max_model_len", "max_seq_len=", r"\bmax_seq_len=(\d+)"),
    ("max_model_len", "max_model_len", r"\bmax_model_len['\"]?[=:] ?(\d[\d,]*)"),
    ("max_model_len", "--max-model-len", r"--max-model-len[= ](\d+)"),
    ("block_size", "block_size", r"\bblock_size['\"]?[=:] ?(\d+)"),
    ("block_size", "--block-size", r"--block-size[= ](\d+)"),
    ("weights_gib", "weights took", r"Loading model weights took (-?[\d.]+) ?(?:GB|GiB)"),
    ("weights_gib", "Model loading took", r"Model loading took (-?[\d.]+) ?(?:GB|GiB)"),
    ("gpu_memory_utilization", "memory_utilization", r"gpu_memory_utilization['\"]?[=:] ?([01]?\.\d+|1(?:\.0+)?)\b"),
    ("gpu_memory_utilization", "memory-utilization", r"--gpu-memory-utilization[= ]([01]?\.\d+|1(?:\.0+)?)\b"),
    ("total_gib", "total capacity of", r"total capacity of ([\d.]+) GiB"),
    # sleep mode's own report (gpu_worker.py sleep()): a level-1 sleep that frees nothing left the memory held
    ("sleep_freed_gib", "Sleep mode freed", r"Sleep mode freed (-?[\d.]+) ?GiB memory, ([\d.]+) ?GiB memory is still in use"),
    # the engine's stats line: a full KV cache makes the scheduler preempt (or, before V1, hang) requests
    ("kv_usage_pct", "KV cache usage", r"KV cache usage:? ?([\d.]+) ?%"),
    ("kv_usage_pct", "kv cache us", r"kv cache use?age:? ?(?:is )?([\d.]+) ?%"),  # the person's words
    # Ray's start-up warning about a small /dev/shm (Docker's default is 64 MB)
    ("shm_bytes", "/dev/shm has only", r"/dev/shm has only (\d+) bytes"),
    ("tensor_parallel", "tensor_parallel_size", r"\btensor_parallel_size['\"]?[=:] ?(\d+)"),
    ("tensor_parallel", "tensor-parallel-size", r"--tensor-parallel-size[= ]+(\d+)"),
)
# the person's words for /dev/shm running out (also in Chinese)
_SHM_SAID = Lazy(r"(?i)\b(?:out of|not enough|insufficient|lack of|too little)\s+(?:the\s+)?(?:shared memory|shm|/dev/shm)\b"
                 r"|/dev/shm\b[^.]{0,60}?\b(?:is |was )?(?:too small|full|only 64 ?mb|64 ?mb default)"
                 r"|\b64 ?mb\b[^.]{0,40}?/dev/shm|(?:/dev/shm|共享内存)[^。]{0,12}?(?:可用)?(?:空间)?不足")
# lines whose words alone say which entry (substring, entry, what it says): vLLM's own warnings
_SAYS_LINES = (
    ("cudaHostRegister", "kv-offload-host-memory", Lazy(r"cudaHostRegister\W.{0,300}?(?:fail|cudaErrorMemoryAllocation)"),
     "pinning the KV offload region in host RAM failed (cudaHostRegister): the offload size is more than the host can lock"),
    # in words: the container's /dev/shm ran out ("running out of shared memory", "may run out of shm for NCCL
    # init"); not Triton's per-block limit ("out of resource: shared memory") nor the broadcast queue's wait
    ("shared memory", "container-shm-too-small", _SHM_SAID, "the person says shared memory (/dev/shm) ran out"),
    ("shm", "container-shm-too-small", _SHM_SAID, "the person says shared memory (/dev/shm) ran out"),
    # in words: a TPU's HBM could not hold what was allocated
    ("HBM", "tpu-hbm-resource-exhausted", Lazy(
        r"(?i)^(?=.*\btpus?\b)(?=.*\bhbm\b)(?=.*(?:out of|not enough|insufficient|fail|cannot|can't|unable|prevent|"
        r"exhaust|\boom\b|fragment))"),
     "the person says the TPU's HBM could not hold it"),
    # in words: vLLM's "Available KV cache memory: -3.75 GiB" told as "negative space/memory for the KV cache"
    ("negative", "no-memory-for-cache-blocks",
     Lazy(r"(?i)\bnegative\b[^.]{0,40}?\bkv[ -]?cache\b|\bkv[ -]?cache\b[^.]{0,40}?\bnegative\b"),
     "the person says the room left for the KV cache came out negative: no memory was left for it"),
    # in words: the start-up check that one step's tokens hold a whole sequence ("making sure
    # max_num_batched_tokens >= max_model_len", "max-num-batched-tokens smaller than max-model-len")
    ("batched", "max-num-batched-tokens-below-max-model-len", Lazy(
        r"(?i)max[_-]num[_-]batched[_-]tokens\W{0,3}(?:(?:is|was|must be|should be|to be|be|set)\s+)?(?:>=|<|≥|"
        r"(?:smaller|less|lower|no smaller|not smaller|at least)\b)[^.]{0,30}?max[_-]model[_-]len"
        r"|max[_-]model[_-]len\W{0,3}(?:(?:is|was)\s+)?(?:>|<=|(?:larger|greater|bigger|more)\b)[^.]{0,30}?max[_-]num[_-]batched[_-]tokens"),
     "the person compares max_num_batched_tokens with max_model_len: vLLM refuses to start when one step's tokens cannot hold a whole sequence"),
    # in words: vLLM's start-up check that the device's free memory covers gpu_memory_utilization's share
    # ("a crashloop with not enough free GPU memory", "refuses to start when free GTT (29 GiB) < requested")
    ("free", "insufficient-free-memory-at-startup", Lazy(
        # (not where the sentence names the step that failed: "fails during CUDA graph capture due to
        # insufficient free memory" is that step's out-of-memory error)
        r"(?i)^(?!.*\b(?:captur\w*|during|while|loading|serving)\b)(?:.*?\b(?:not enough|insufficient|too little)\s+free\s+"
        r"(?:gpu\s+|device\s+|vram\s+|gtt\s+)?memory\b|.*?\bfree\b[^.<]{0,40}<\s*(?:requested|desired)\b)"),
     "the person says the device's free memory fell short of what vLLM asks for at start-up"),
    # Ray's memory monitor (Ray 2.x) lists the workers it considered and killed, each as "(Task: job ID=..,
    # lease ID=.., task name=.., .., pid=.., actual memory used=7.39GB, worker ID=..)": only that report
    # prints a worker's memory this way (its docs, "Limiting the memory usage")
    ("actual memory used=", "ray-memory-monitor-kill",
     Lazy(r"\((?:Task|Actor\([0-9a-f]+\)): job ID=[0-9a-f]+,.{0,400}?\bactual memory used=[\d.]+ ?GB"),
     "Ray's memory monitor lists this worker with the host memory it used: it kills workers when the node runs low on memory"),
)
_NUMBER_GATES = tuple({n[1] for n in _NUMBERS})
_LEAST_WINS = frozenset(("available_kv_gib", "device_blocks", "available_bytes", "kv_tokens"))
_NUMBER_RES = [(name, gate, Lazy(rx)) for name, gate, rx in _NUMBERS]

# --- frames ------------------------------------------------------------------------------------

_RAISE_RE = Lazy(r"^\s*raise (?P<type>[A-Z]\w*(?:Error|Exception))\((?P<rest>.*)$")
_ASSERT_RE = Lazy(r"""^assert .+?,\s*(?P<rest>(?:f|r|fr|rf)?["'].*)$""")
_STRING_RE = Lazy(r"""(?:f|r|fr|rf)?(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')""")
_CALL_RE = _rx(r"(\w+)\(")  # a call by name: "`capture_model()` OOMed" in a person's sentence
# a call with what qualifies it (`torch.distributed.all_reduce(`): a call into another library's module
# is none of vLLM's functions, whatever vLLM names its own (the callee table is read from vLLM's code)
_QCALL_RE = _rx(r"((?:\w+\.)*)(\w+)\(")
# other serving engines' packages: their functions share vLLM's names (Scheduler, ModelRunner, ...)
_OTHER_ENGINE_DIRS = ("/sglang/", "/tensorrt_llm/", "/lmdeploy/", "/text_generation_server/", "/mlc_llm/",
                      "/llama_cpp/", "/exllamav2/")
_OTHER_MODULES = frozenset(("torch", "torch_npu", "torch_xla", "np", "numpy", "ray", "asyncio", "os", "sys", "json",
                            "jax", "jnp", "triton", "math", "time", "dist", "F", "nn", "transformers", "safetensors",
                            "concurrent", "multiprocessing", "threading", "subprocess", "functools", "itertools"))

# The deepest vLLM function a cut traceback reached, and what it can raise. "likely": the function
# exists to check or allocate that memory, so it raises little else; "possible": a stage where
# memory errors are common but others happen too (a kernel built for another GPU fails there as well).
FRAME_HINTS = (
    # (function names, tier, entry ids best first, what it means)
    (("check_enough_kv_cache_memory", "_check_enough_kv_cache_memory"), "likely",
     ("no-memory-for-cache-blocks", "max-model-len-exceeds-kv-cache"),
     "vLLM's KV-capacity check raised: it raises only when the KV cache is empty or smaller than max_model_len"),
    (("wake_up",), "likely", ("sleep-mode-wake-up-oom",),
     "the traceback is inside wake_up(): sleep mode putting the weights and KV cache back on the GPU"),
    # "oom:<stage>": PyTorch's out-of-memory error of that stage on the paste's device (engine.Matcher's
    # stage entries): the KV cache allocation raises nothing of vLLM's own, only the allocator's OOM
    (("capture_model", "_capture_cudagraphs", "capture_graphs", "graph_capture"), "likely",
     ("oom:cudagraph",), "the traceback is inside CUDA-graph capture"),
    (("initialize_kv_cache", "_allocate_kv_cache_tensors", "_allocate_kv_cache", "allocate_kv_cache",
      "initialize_kv_cache_tensors", "_init_cache_engine", "init_cache_engine"), "likely",
     ("oom:startup",), "the traceback is inside the KV cache allocation"),
    (("determine_num_available_blocks", "determine_available_memory", "profile_run", "_dummy_run",
      "_dummy_sampler_run", "load_model", "load_weights"), "possible",
     ("oom:startup",), "the traceback is inside start-up (loading or profiling)"),
    (("execute_model", "_run_engine", "step", "execute_model_spmd"), "possible",
     ("oom:serving",), "the traceback is inside a model step while serving"),
    (("schedule", "_schedule", "_schedule_running", "_preempt", "_swap_out", "_schedule_default"), "possible",
     ("cpu-swap-space-exhausted", "no-free-blocks-internal"), "the traceback is inside the scheduler"),
    # PyTorch's own code putting the model's tensors on the device (Module.to / .cuda() / .xpu() run
    # _apply, which runs convert: `t.to(device, ...)` per parameter): a device allocation at load time,
    # with no vLLM frame below it to say more (Scanner.deepest names these frames TORCH_MOVE)
    (("Module.to",), "likely", ("oom:startup",),
     "the traceback is inside PyTorch moving the model's weights onto the device (Module.to -> _apply -> convert)"),
)
TORCH_MOVE = "Module.to"
# (file, functions): PyTorch's frames that copy a module's tensors onto the device
_TORCH_MOVE_FRAMES = (("torch/nn/modules/module.py", ("_apply", "convert", "to", "cuda", "xpu", "npu", "to_empty")),)
_HINT_FUNCS = {f: h for h in FRAME_HINTS for f in h[0]}
# Host RAM ran out and something killed the engine or a worker: the kernel's OOM killer, Kubernetes,
# Ray's memory monitor (strong), or a bare SIGKILL (weak: a person can kill -9 too; it counts only
# under a wrapper that says the engine or a worker died). (pattern, strong, what it says), tried only
# on lines holding one of the gate words
_HOST_GATES = ("kill", "Kill", "137", "OOM", "oom", "Out of memory", "memory pressure", "low on memory", "usage threshold", "-9", "MEM(GB)")
_HOST_RES = (
    (Lazy(r"Out of memory: Kill(?:ed)? process|\boom-kill(?:er)?\b|oom_reaper|invoked oom-killer"), True,
     "the kernel's OOM killer killed a process: the host ran out of RAM"),
    (Lazy(r"\bOOMKilled\b"), True, "Kubernetes killed the container for exceeding its memory limit (OOMKilled)"),
    (Lazy(r"(?i)exit(?:ed)?(?: with)? (?:code|status)[:= ]*137\b|\bcode 137\b"), True,
     "exit code 137: the process was killed with SIGKILL, what the OOM killer sends"),
    (Lazy(r"memory usage threshold|killed due to memory pressure|running low on memory"), True,
     "Ray's memory monitor killed a worker: the node's RAM was above its threshold"),
    (Lazy(r"\bPID\s+MEM\(GB\)\s+COMMAND\b"), True,
     "Ray's memory monitor's table of the top memory users (PID MEM(GB) COMMAND): it prints it when it kills a worker for the node's RAM"),
    # Ray's report of a worker that died without a word (SYSTEM_ERROR): first of the causes it lists is the
    # kernel's OOM killer (its own memory monitor says "running low on memory" instead); one cause of several
    (Lazy(r"killed by SIGKILL by OOM killer"), False,
     "Ray says the worker process died, and names the kernel's OOM killer (SIGKILL for high memory usage) first among the causes"),
    # the shells' reports of a job killed by SIGKILL: bash's "Killed" (alone, after "line N: PID", or glued
    # to the progress bar the process was drawing: "3/8 [00:08<00:14,  2.91s/it]Killed"), zsh's
    # "[1]    14875 killed     python main.py"
    (Lazy(r"^(?:\S+: line \d+: +\d+ )?Killed\b(?: +\S.*)?$|(?<=\])Killed[\x22'`]?$|^\[\d+\] +[+-]? *\d+ killed +\S|(?<=\])\[\d+\] +[+-]? *\d+ killed +\S"
          r"|\bSIGKILL\b|signal 9\b|[Ee]xit ?[Cc]ode[:= ]*-9\b|exitcode[=: ]*-9\b"),
     False, "the process was killed with SIGKILL (signal 9), what the OOM killer sends"),
)
# A wrapper saying the engine, a worker or a Ray actor died (never an answer on its own)
_DIED_RE = Lazy(r"EngineDeadError|RayActorError|ActorDiedError|WorkerProc\w* died|Worker proc \S+ died|died unexpectedly"
                r"|Engine core proc \S+ died|The actor died")

# the end of PyTorch's OOM message: "... is reserved by PyTorch but unallocated" (torch >= 2.1), the older
# "... reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb"
_TORCH_OOM_TAIL_RE = Lazy(r"is reserved by PyTorch but unallocated|reserved in total by PyTorch\)")
# the person's own words: "I get OOM", "runs out of memory", 显存不足 / 显存溢出 ("not enough GPU memory")
def _says_oom_gate(text: str) -> bool:
    """Substrings every _SAYS_OOM_RE match holds (most lines hold none: the regex need not compile; a line
    that only says "memory", such as PyTorch's NUMA warning, does not open it)."""
    if "显存" in text:
        return True
    low = text.lower()
    return "oom" in low or "out of " in low or "outofmemory" in low or (
        ("memory" in low or "vram" in low) and ("insufficient" in low or "enough" in low or "exhaust" in low)) or (
        "fit" in low and ("gb" in low or "gib" in low))


_SAYS_OOM_RE = Lazy(r"(?i)(?<![a-z])OOM(?:s|ed|ing|'d)?(?![a-z])|out of (?:gpu |cuda |device |video |vram |gpu vram )?memory|out of vram\b"
                    r"|OutOfMemory|显存不足|显存溢出|爆显存"
                    # "fails ... due to insufficient free memory", "not enough GPU memory" (the KV cache's own
                    # shortage is _PROSE_KV_RE's)
                    r"|\b(?:insufficient|not enough) (?:free |gpu |device |cuda |vram )?memory\b(?! (?:for|in) (?:the )?kv)"
                    # "my GPU doesn't have enough memory", "does not have enough VRAM"
                    r"|\b(?:doesn't|does not|don't|do not|didn't|did not|won't|hasn't|has not)(?: have)? enough (?:free |gpu |device |cuda )?(?:memory|vram)\b(?! (?:for|in) (?:the )?kv)"
                    # "doesn't fit on a single 24GB GPU", "unable to fit it in 96GB": the weights or the context
                    # outgrow the device's memory, the person's way of saying it ran out
                    r"|\b(?:can ?not|can't|unable to|doesn't|does not|don't|do not|didn't|did not|won't|not)"
                    r" fit (?:[\w.-]+ ){0,4}?(?:in|on|into|onto|within) (?:[\w.-]+ ){0,3}?\d+(?:\.\d+)? ?gi?b\b"
                    # "it seems to exhaust all the available memory", "memory is exhausted"
                    r"|\bexhaust(?:s|ed|ing)? (?:all |the |of )*(?:available |free |gpu |system |host |device )*memory\b|\bmemory (?:is |was |gets |got )?exhausted\b")
# ... while sleep mode woke the engine up (the person's words: "wake up OOMs", "waking up")
_SAYS_WAKE_RE = Lazy(r"(?i)(?<![a-z])wak(?:e[ _-]?up|ing up)")
_NEAR = 3  # lines between the person's "OOM" and the step they name
# the step a person names in words: (stage, regex) as named groups
_PROSE_STAGE_RE = Lazy(r"(?i)(?P<startup>\bwhile (?:the )?model is loading|\bloading (?:[\w.-]+ ){0,3}?(?:model|weights|checkpoint)s?\b|\b(?:tensor|weight|model|checkpoint|shard)s? loading\b|\b(?:when|while) (?:i )?(?:(?:try|attempt)(?:ing)? to )?(?:initiali[sz]|start|launch|load|deploy)(?:e|es|ed|ing)?\b|\b(?:at|on|during) (?:the )?(?:server |engine |vllm |model )?start-?up\b"
                       r"|\bduring (?:the )?(?:vllm'?s? |engine |model |server )?(?:initiali[sz]ation|init|loading|launch)\b|\b(?:fails?|failed|unable|can ?not|can't) to (?:start|launch|load)\b|\bstart-?up (?:ooms?|out of memory|crash(?:es)?|failures?)\b"
                       r"|\bwarm-?up\b|\bprofil(?:e|ing) (?:run|stage|step|phase)\b|\bduring (?:the )?(?:[\w-]+ ){0,3}?(?:memory )?profiling\b|\bat load(?:ing)? time\b"
                       r"|\bload(?:s|ed)? (?:successfully|fine)\b|\binitiali[sz]ation (?:fails?|failed|crash(?:es|ed)?)\b|\bbefore (?:running|sending|serving|handling) (?:any )?requests?\b"
                       r"|加载|启动|初始化)"
                       r"|(?P<cudagraph>\bcapturing (?:the )?(?:(?:full|piecewise|decode|prefill|mixed) )?(?:cuda[- ]?graphs?|cudagraphs?)|\bcuda[- ]?graph capture"
                       r"|\b(?:at|during) (?:the )?(?:real |cuda[- ]?graph |graph )?capture\b)"
                       r"|(?P<serving>\bpreempt(?:ed|ion|ions|s|ing)\b|\b(?:while|when|during) (?:\w+ ){0,3}?(?:serving|generating|inference|rollout|decoding|decode|prefill|benchmarking|evaluat(?:e|es|ing|ion)|benchmarks?)\b|\bduring (?:the )?(?:generation|decode|evaluation|benchmark)\b|\bunder (?:\w+ )?load\b|\bsaturating load\b|\bin-flight requests?\b|^\s*serving\b|\bafter (?:(?:running|serving) for (?:some|a few|several|many|\d+) (?:hours|minutes)|(?:some|a few|several|many|\d+) (?:requests|hours))\b"
                       r"|\bafter (?:the )?(?:server )?(?:(?:a )?successful(?:ly)? )?(?:start-?up|starting|launch(?:ing)?|it (?:starts|started)|started|warm-?up)\b"
                       # traffic and the requests it brings: "during normal traffic", "concurrent requests", "the next large request"
                       r"|\b(?:under|during|with|from|once|when) (?:\w+ )?traffic\b|\b(?:with|under|at|during|handling|serving) (?:\S+ )?concurrent (?:requests|users|load)\b"
                       r"|\bserv(?:e|es|ed|ing) (?:\w+ ){0,2}?requests\b|\bthe next (?:large |long |big )?request\b|\bin the middle of (?:a |one )?request\b"
                       r"|\bduring (?:load[ -]?test(?:ing)?|benchmark(?:ing)?)\b|\bsend(?:s|ing)? (?:a |an |the |many |some |\d+ )?(?:[\w-]+ ){0,2}?(?:prompts?|requests?|quer(?:y|ies))\b"
                       r"|\b(?:prompt_)?logprobs\b|\b(?:accept|process|handl)(?:s|e|es|ed|ing)? (?:new |incoming |more )?requests\b|\b(?:at|during) run-?time\b|\b(?:on|at|with|after) (?:the |a |its |my )?(?:very )?first (?:prompt|request|query|api call|chat|completion)\b|\b(?:input|prompt|request) is (?:excessively |too |very )?long\b|推理时|推理过程|生成时|并发|请求数|访问次数|发送请求|处理请求)")
# "insufficient KV cache memory", "not enough KV cache", "the KV cache is too small"
_PROSE_KV_RE = Lazy(r"(?i)\b(?:insufficient|not enough|too little|no available)\b[^.]{0,30}?\bkv[ -]?cache\b"
                    r"|\bkv[ -]?cache\b[^.]{0,30}?\b(?:is too small|too small|not enough|insufficient)\b"
                    # "when KV cache space is constrained", "the KV cache is full", "requests run out of KV cache"
                    r"|\bkv[ -]?cache (?:space |memory |capacity |blocks )?(?:is |was |gets |got |becomes |became )?(?:constrained|exhausted|full|running out|runs out|ran out)\b"
                    r"|\b(?:run|runs|ran|running) out of (?:the )?(?:free )?kv[ -]?cache\b"
                    # vLLM's capacity check retold: "--max-model-len 262144 needed 4.93 GiB and only 3.93 GiB was available"
                    r"|\bmax[-_ ]model[-_ ]len\b[^.]{0,40}?\b(?:needs?|needed|requires?|required)\b[^.]{0,20}?\d(?:\.\d+)? ?gi?b\b"
                    r"[^.]{0,40}?\b(?:only|available)\b"
                    # "KV cache 内存不足" / "KV cache 空间不够" (the KV cache's memory/space is not enough)
                    r"|kv[ -]?cache ?(?:的)?(?:内存|显存|空间|容量)?(?:不足|不够|太小)")
_PROSE_LINES_MAX = 256  # lines of a person's words kept for prose_stage
_PROSE_STAGE_GATES = ("load", "initiali", "start", "launch", "captur", "graph", "while", "when", "during", "after", "warm",
                      "before", "flight", "erv", "profil", "traffic", "concurren", "request", "logprobs", "long", "send", "first", "加载", "启动", "初始化", "推理", "生成", "并发", "请求",
                      "访问", "preempt")
_WHEN = {"startup": "at start-up", "cudagraph": "during CUDA-graph capture", "serving": "while serving"}


def _called_stage(text: str) -> tuple[str, str] | None:
    """(stage, function) for the last function named with its call parentheses whose name alone tells
    the step (the names a traceback's frames are read by), else None."""
    found = None
    for m in _CALL_RE.finditer(text):
        st = stage(frame_cues("", m.group(1)))
        if st is not None:
            found = (st, m.group(1))
    return found

_PROSE_SAYS = {st: f"{when} (their words)" for st, when in _WHEN.items()}
# "killed by Kubernetes when memory crosses the limit", "经常oom直接被kill了", "the memory monitor kills the actor"
_DEVICE_OOM_RE = Lazy(r"\b(?:CUDA|HIP|NPU|XPU|GPU|HPU|[Dd]evice)\b")
_PROSE_KILL_RE = Lazy(r"(?i)(?<![a-z])kill(?:s|ed)?(?![a-z])|\bOOMKilled\b|杀")  # 被系统OOM杀进程: killed by the system's OOM
_PROSE_MEM_RE = Lazy(r"(?i)\bmemory\b|\bRAM\b|内存|(?<![a-z])oom(?![a-z])")
# the person's words naming the host's memory (free -h, RAM, system memory, a size no accelerator has)
# or the device's: an OOM they tell of with only the host's named is the host's
_PROSE_HOST_RE = Lazy(r"(?i)\bfree -[hmg]\b|\b(?:host|system|cpu|main)\s+(?:memory|ram)\b|(?<!gpu )(?<!cuda )(?<!video )\bRAM\b"
                      # vLLM's CPU backend keeps weights and KV cache in the host's memory
                      r"|\bvllm[- ]cpu\b|\bcpu (?:pod|backend|node|instance|container)s?\b"
                      r"|\b\d+(?:\.\d+)?\s?TB\b|内存")
# an out-of-memory they pin on the host: "CPU Out of Memory", "RAM OOM", "out of host memory", 内存oom / 内存不足
_HOST_OOM_RE = Lazy(r"(?i)\b(?:cpu|host|system|ram)[ -]?(?:memory )?(?:out of memory|oom(?:ed|s)?\b)|\bout of (?:host |system |cpu )(?:memory|ram)\b"
                    r"|\bout of ram\b|(?<!显)内存\s*(?:oom|溢出|不足|爆)")
_PROSE_DEVICE_RE = Lazy(r"(?i)(?:(?<![a-z])|(?<=\dx))(?:gpus?|cuda|vram|hbm|npus?|xpus?|tpus?|a100|a800|h100|h800|h200|h20|b200"
                        r"|a10g?|l40s?|l4|t4|v100|rtx|mi[23]\d\dx?|910b\d?)(?![a-z])|device memory|显存|显卡"
                        # GeForce cards by their number ("two 3090s", "a 4090", "5090 Laptop")
                        r"|(?<![\d.:/-])(?:[2-5]0[6-9]0|1080)(?: ?ti)?s?(?![\d])")
# a TPU's on-chip memory spaces (XLA's SMEM and VMEM), named by the person or the log
_SAYS_SPACE_RE = Lazy(r"(?i)(?<![a-z])[sv]mems?(?![a-z])")
TPU_SPACE_ENTRY = "tpu-smem-vmem-exhausted"

# The accelerator a log names anywhere (its platform line, its plugin's package, the vendor's words):
# PyTorch's out-of-memory error differs per device, so the device picks the entry
_LOG_DEVICE_RE = Lazy(
    # (?a): \b is ASCII's, so a device glued to Chinese text ("遇到NPU out of memory") is still a word
    r"(?a)(?P<npu>vllm[_-]ascend|torch_npu|\bNPUs?\b|\bnpu\b|\bAscend|(?<![0-9])910[BbCc]\d?(?![0-9A-Za-z])|\bAtlas \d{3}|NZ format"
    # the platform's own environment variables (an `export` block, a pod spec)
    r"|PYTORCH_NPU_ALLOC_CONF|ASCEND_RT_VISIBLE_DEVICES|VLLM_ASCEND_\w+|\bHCCL_\w+)"
    r"|(?P<xpu>\bXPUs?\b|\bxpu\b|_xpu_|intel_extension_for_pytorch|\bipex\b|ipex[-_]llm|Intel\(R\) Arc"
    # Intel's Arc GPUs as people write them ("on 4 Arc", "2Arc", "Arc A770"); not "ARC" (a benchmark) nor "arc_easy"
    r"|(?<![A-Za-z])Arc(?![A-Za-z_-])|level_zero"
    r"|\b[Ii]ntel[-_ ]?[Gg][Pp][Uu]s?\b|\bZE_AFFINITY_MASK|\bSYCL_\w+)"
    r"|(?P<hpu>[Hh]abana|\bGaudi|\bHPUs?\b|\bhpu\b|synStatus|vllm[_-]gaudi|PT_HPU)"
    # (a TPU generation as its machine type names it: "tpu7x", "tpu-v5e", "tpu_v6e")
    r"|(?P<tpu>torch_xla|\bTPUs?\b|\btpu\b|\btpu[-_]?v?\d+[a-z]?\b|libtpu|tpu_inference|PJRT_DEVICE=TPU)")

# literals one of which every _LOG_DEVICE_RE match holds (a bare lowercase word after a non-letter:
# "input" and "output" hold "npu" and "tpu"); searched first, since most lines name no device
_DEVICE_GATE_RE = Lazy(r"NPU|XPU|HPU|TPU|xpu|scend|910|Atlas|NZ format|ipex|Arc|level_zero|abana|audi|synStatus|xla|ntel[-_ ]?[Gg][Pp][Uu]"
                       r"|torch_npu| npu|npu:|'npu|\.npu|hpu_|_hpu| hpu|\.hpu|tpu_|libtpu| tpu|_NPU_|ASCEND|HCCL_|ZE_AFFINITY|SYCL_")

_CAMEL_RE = _rx(r"([A-Z]{3,})([A-Z][a-z])")  # an acronym glued to the next word: "NPURayWorker"

# A worker that reports the method it was running when it failed (V0's multiproc workers, the
# executors' RPC): that method is a frame of the failure even when its traceback is cut
_METHOD_RE = Lazy(r"""(?:while processing method|Error executing method) ['"]?(\w+)""")  # '%r' quotes it in newer releases
_METHOD = "the method the worker ran"
# `_run_workers("init_cache_engine", ...)`: vLLM calls its workers' methods by name
_RPC_RE = Lazy(r"""\b(?:_run_workers|run_workers|_run_workers_async|collective_rpc|execute_method)\(\s*["'](\w+)["']""")
# a traceback flattened onto one line (its line breaks lost on the way to the paste): its frames inline
_INLINE_FRAME_RE = Lazy(r'File "(?P<path>[^"]+)", line \d+, in (?P<func>[\w<>]+)')
# IPython/Jupyter frames: `File /x/vllm/worker/worker.py:139, in Worker.determine_num_available_blocks(self)`,
# the line that ran marked `--> 139`
_IPY_FRAME_RE = Lazy(r"^File (?P<path>\S+?):\d+, in (?:[\w<>]+\.)*(?P<func>[\w<>]+)\(")
# frames that only construct the engine: a traceback cut in them is start-up
_STARTUP_FRAMES = frozenset(("from_engine_args", "from_vllm_config", "from_engine_configs", "_init_executor",
                             "_init_workers_ray", "run_mp_engine", "run_rpc_server", "run_engine_core", "_initialize_kv_caches",
                             "_init_cache", "init_worker", "init_device",
                             # the API server building its engine client (V0 and V1): the engine's whole start-up
                             "build_async_engine_client", "build_async_engine_client_from_engine_args"))
_CONSTRUCTOR_PATHS = ("entrypoints/llm.py", "engine/llm_engine.py", "engine/async_llm_engine.py", "v1/engine/core.py",
                      "engine/multiprocessing/engine.py", "v1/engine/llm_engine.py", "v1/engine/async_llm.py")

# Start-up steps the timeline names (segment.MILESTONES, plus a few lines that only say what runs next)
# -> the vLLM functions that run from there until the next step, and the stage of PyTorch's OOM there.
# Read from vLLM's start-up order (V0 LLMEngine._initialize_kv_caches / V1 EngineCore._initialize_kv_caches):
# load the weights; profile a dummy batch (determine_available_memory / determine_num_available_blocks);
# size the KV cache and check max_model_len against it; allocate it (initialize_from_config /
# initialize_cache); warm up and capture CUDA graphs (compile_or_warm_up_model); serve.
_PHASE_LINES = (("Starting profile run", "profiling"), ("Encoder cache will be initialized with a budget", "profiling"))
_PHASE_FUNCS = {
    "loading weights": (("load_model",), "startup"),
    "weights loaded": (("determine_available_memory", "determine_num_available_blocks", "profile_run"), "startup"),
    "profiling": (("determine_available_memory", "determine_num_available_blocks", "profile_run"), "startup"),
    "memory profiled": (("get_kv_cache_config", "initialize_cache", "initialize_from_config",
                         "compile_or_warm_up_model"), "startup"),
    "KV cache sizing": (("check_enough_kv_cache_memory", "raise_if_cache_size_invalid", "initialize_from_config"), "startup"),
    "KV cache sized": (("initialize_from_config", "compile_or_warm_up_model"), "startup"),
    "CUDA-graph capture": (("compile_or_warm_up_model",), "cudagraph"),
    "graph capture": (("compile_or_warm_up_model",), "cudagraph"),
    "CUDA graphs captured": (("compile_or_warm_up_model",), "startup"),
    "engine initialised": (("execute_model", "step"), "serving"),
    "serving": (("execute_model", "step"), "serving"),
}
# a cut traceback whose own frames show the stage (and no step of the log does): what that stage runs
_STAGE_FUNCS = {"serving": ("execute_model", "step"), "cudagraph": ("compile_or_warm_up_model",),
                "startup": ("determine_available_memory", "determine_num_available_blocks", "initialize_from_config",
                            "compile_or_warm_up_model")}


def _raises(line: str) -> bool:
    """An exception line (a warning category is not one: it ends no traceback)."""
    exc = _exception(line)
    return exc is not None and not exc[0].endswith("Warning")


class Fact:
    """One piece of evidence: a line of the log and what it says."""

    __slots__ = ("line", "text", "says")

    def __init__(self, line: int | None, text: str, says: str):
        self.line, self.text, self.says = line, text, says

    def to_dict(self) -> dict:
        return {"line": self.line, "text": self.text[:300], "says": self.says}

    def __repr__(self) -> str:
        return f"Fact({self.line}, {self.says!r})"


class Hint:
    """An entry the evidence points to, with its tier and the facts behind it."""

    __slots__ = ("entry", "tier", "facts", "rank")

    def __init__(self, entry: str, tier: str, facts: list[Fact], rank: float):
        self.entry, self.tier, self.facts, self.rank = entry, tier, facts, rank

    def __repr__(self) -> str:
        return f"Hint({self.entry!r}, {self.tier!r}, {self.rank})"


class Startup:
    """What one start-up of the server showed, in log order."""

    def __init__(self, line: int | None):
        self.line = line
        self.kinds: set[str] = set()
        self.numbers: dict[str, tuple[float, Fact]] = {}
        self.extra: dict[str, tuple[float, Fact]] = {}  # second values (concurrency's token count)
        self.kv_sizing: Fact | None = None  # the last KV-sizing milestone seen
        self.kv_sized = False  # vLLM printed the KV cache size: its capacity checks passed
        self.weights: Fact | None = None
        self.says_oom: Fact | None = None


class Scanner:
    """Reads parsed lines (segment.parse) in log order; feed() returns each line's (startup, stage, step)."""

    def __init__(self, callees: dict | None = None) -> None:
        # {"functions": {name: {entry: [releases]}}, "weights": {entry: corpus count}} (derive_callees.py)
        self.callees = callees or {}
        self._called = self.callees.get("functions", {})
        self._allocates = frozenset(self.callees.get("allocates", ()))  # functions whose callees allocate device memory
        self.startups: list[Startup] = [Startup(None)]  # index 0: before any start-up line
        self.marked = 0  # start-up lines seen
        self.stage: str | None = None
        self.step: str | None = None
        self.stage_at: tuple[int, str] | None = None  # (line, text) of the milestone that set stage
        self.frames: list[tuple[int, str, str]] = []  # the open traceback's frames (line, func, path)
        self.raise_line: tuple[int, str, str] | None = None  # (line, type, literal) in the deepest frame
        self.open_tb: Fact | None = None  # a traceback whose exception line has not come yet
        self.last_tb: list[tuple[int, str, str]] = []  # frames of the last traceback, open or closed
        self.last_raise: tuple[int, str, str] | None = None
        self.failure: Fact | None = None  # the last ERROR line or exception seen
        self.host: list[tuple[Fact, bool]] = []  # host-RAM kills seen (fact, strong)
        self.died: Fact | None = None  # a wrapper saying the engine, a worker or an actor died
        # vLLM's "Aborted request <id>" lines: (line, start-up, text); requests in flight when an error hit
        self.aborts: list[tuple[int, int, str]] = []
        self.devices: dict[str, int] = {}  # accelerator named in the log -> lines naming it
        self.last_at = 0  # the last line with any content: a failure there is where the paste stops
        self.last_text = ""  # that line's text after any log prefix (where a paste with no error ends)
        self.vllm_seen = False  # the paste names vLLM anywhere (engine.match_stream sets it per window)
        self.said_error = False  # a word of failure somewhere in the paste (engine.match_stream)
        self.device_oom: Fact | None = None  # an accelerator's out-of-memory exception in view
        # V1 tags each line with its process: `(APIServer pid=N)` is the OpenAI server, which holds no model
        self._prefixed: tuple = ()
        self.tb_api = False  # the last traceback runs in the API server process
        self.other_program: str | None = None  # another engine or a trainer the paste names, when it never names vLLM
        # exception line -> the program whose frames raised it: a whole traceback (its head in view, no
        # frames left out) in which no frame and no source line is vLLM's
        self.foreign_tb: dict[int, str] = {}
        self._tb_whole = False  # the open traceback's head is in view and nothing was left out of it
        self._line_calls: list[str] = []  # the functions the last source line of a traceback calls
        self._calls_above_last: list[str] = []  # ... those of the source line right above its last frame
        self._tb_vllm = False  # a frame or source line of the open traceback is vLLM's
        self.phase: tuple[int, str, str] | None = None  # (line, text, step) of the last start-up step seen
        self._ipython = False  # IPython frames: only the `-->` source lines ran
        self.says_space: Fact | None = None  # SMEM / VMEM named anywhere
        self._wake_at: Fact | None = None  # the last line naming a wake-up (wake_named)
        # lines of the person's words that may name a step: (line, text, on their "OOM" line); read into
        # prose_stage only when an answer needs it (its regex is the costliest to compile, most pastes never ask)
        self._prose_lines: list[tuple[int, str, bool]] = []
        self._prose_read: tuple[str, Fact] | None | bool = False
        self.says_kv: Fact | None = None  # "insufficient KV cache memory", in the person's words
        self.says_wake: Fact | None = None  # the person says the OOM came when sleep mode woke up
        self.says_host: Fact | None = None  # the person names the host's memory (RAM, free -h)
        self._words: list[str] = []  # the person's lines, for says_device (read only when an answer asks)
        self.said: list[tuple[str, Fact]] = []  # (entry, fact) from _SAYS_LINES
        self._oom_head = False  # a line saying "out of memory" was read: a PyTorch OOM's end below it is its own
        self.launched_at: int | None = None  # the last line launching the server (a `vllm serve` command)
        self._tags_seen: set[str] = set()  # launcher tags already read for a device name
        self._dump = False  # inside a faulthandler dump's frames ("Current thread ... (most recent call first)")
        self.gpu_platform = False  # "Automatically detected platform cuda/rocm."
        # entry -> (whether any wording is an exception, the engines its wordings are for); set by the engine
        self.entry_meta: dict[str, tuple[bool, frozenset]] = {}
        self.ctor_sites: dict[str, list[str]] = {}  # class -> entries its __init__ raises (the KB's notes; the engine sets it)

    @property
    def current(self) -> Startup:
        return self.startups[-1]

    @property
    def wake_named(self) -> bool:
        """A line names sleep mode waking the engine up (near the error or not)."""
        return self._wake_at is not None

    @property
    def restarts(self) -> int:
        return max(0, self.marked - 1)

    def feed(self, parsed: list[tuple]) -> list[tuple]:
        """Per line: (start-up, stage, step, (line, text) of the milestone that set the stage)."""
        out = []
        for lineno, content, level, prefixed, fence in parsed:
            self._prefixed = prefixed  # read only where a traceback starts (which process it runs in)
            if prefixed:
                self._tags(prefixed)
            if not fence and content:
                self._line(lineno, content, level)
            out.append((len(self.startups) - 1, self.stage, self.step, self.stage_at))
        return out

    def _tags(self, shape: tuple) -> None:
        """A launcher's tag names the accelerator (a docker-compose service `intel-gpu-vllm  |`, a pod
        `[pod/vllm-ascend-0/vllm]`): counted once per tag, as one line naming it."""
        for part in shape:
            if part[:1] in "!~" or part in self._tags_seen:
                continue
            if len(self._tags_seen) < 64:
                self._tags_seen.add(part)
            if _DEVICE_GATE_RE.search(part):
                # (a worker class named for its device: Ray's "(NPURayWorkerWrapper pid=..)", "(XPUWorker ..)")
                words = _CAMEL_RE.sub(r"\1 \2", part).replace("-", " ").replace("_", " ")
                dev = _LOG_DEVICE_RE.search(words) or _LOG_DEVICE_RE.search(part)
                if dev:
                    self.devices[dev.lastgroup] = self.devices.get(dev.lastgroup, 0) + 1

    def _from_process(self) -> bool:
        """The line came through a launcher from a process: its pid tag, a rank tag or a log stamp."""
        return any(p[:1] == "~" or "pid=" in p or p.startswith("[rank") for p in self._prefixed) if self._prefixed else False

    def _api_process(self) -> bool:
        return any(p.startswith("(APIServer") for p in self._prefixed) if self._prefixed else False

    def _line(self, lineno: int, content: str, level: str | None) -> None:
        stripped = content.strip()
        if not stripped:
            return
        self.last_at = lineno
        self.last_text = stripped
        elided = len(stripped) <= _ELISION_MAX and stripped in _ELISIONS
        if elided and self.open_tb is None:
            # the person cut lines out here: start-up may have gone on, finished, even served, in them;
            # the last step seen above says nothing about what comes below (inside a traceback "..."
            # only skips frames)
            self.stage = self.step = self.stage_at = self.phase = None
            return
        # an INFO line names the device where it reports the platform (most lines of a big log are INFO)
        if "detected platform cuda" in stripped or "detected platform rocm" in stripped:
            self.gpu_platform = True  # vLLM's own word that it runs on CUDA/ROCm
        if (level not in ("INFO", "DEBUG") or "platform" in stripped or "ccelerator" in stripped or "scend" in stripped) \
                and _DEVICE_GATE_RE.search(stripped):
            dev = _LOG_DEVICE_RE.search(stripped)
            if dev:
                self.devices[dev.lastgroup] = self.devices.get(dev.lastgroup, 0) + 1
        frame = _FRAME_RE.match(content)
        if self._dump:
            # Python's faulthandler dump (a segfault, an abort): its frames follow the crash it reports,
            # innermost first; it is no traceback cut before its exception line
            if frame is not None:
                return
            self._dump = False
        if "most recent call first" in stripped:
            self._dump = True
            self.open_tb = None
            return
        if frame is None and stripped.startswith("File ") and ", in " in stripped:
            frame = _IPY_FRAME_RE.match(stripped)
            self._ipython = frame is not None
        elif frame is not None:
            self._ipython = False
        if frame:
            if self.open_tb is None:
                self.open_tb = Fact(lineno, stripped, "a traceback starts here")
                self.frames = []
                self._tb_whole = self._tb_vllm = False  # its head is not in view
            if not self._tb_vllm and _names_vllm(content):
                self._tb_vllm = True
            if len(self.frames) <= 1:  # its process: where the traceback starts (a worker's method line may lead)
                self.tb_api = self._api_process()
            self._calls_above_last, self._line_calls = (self._line_calls if self.frames else []), []
            self.frames.append((lineno, frame.group("func") or "", frame.group("path")))
            self.raise_line = None
            self.last_tb = self.frames
            self.last_raise = None
            return
        source = self.open_tb is not None and (stripped.startswith("-->") if self._ipython else content[:1].isspace())
        if elided and self.open_tb is not None:
            self._tb_whole = False  # the person left frames out
        if source:
            if not self._tb_vllm and _names_vllm(stripped):
                self._tb_vllm = True
            # the source line under a frame: the function it calls was running too (a paste cut
            # right after it still says where the failure was); a worker method called by name too
            called = [f for q, f in _QCALL_RE.findall(stripped) if not q or q.split(".", 1)[0] not in _OTHER_MODULES]
            self._line_calls = called
            if "(" in stripped and ("_run_workers" in stripped or "rpc(" in stripped or "execute_method" in stripped):
                called += _RPC_RE.findall(stripped)
            # (a call on a PyTorch frame's line is PyTorch's own function, whatever vLLM names alike;
            # a trainer's line calling llm.wake_up() does call vLLM's)
            # (nor is a call on another serving engine's line: SGLang's scheduler.py builds its own Scheduler)
            under = next((f[2] for f in reversed(self.frames) if f[2] != _CALLED), "")
            ours = not _runtime_frame(under) and not any(d in under.replace("\\", "/") for d in _OTHER_ENGINE_DIRS)
            for func in called:
                if ours and (func in _HINT_FUNCS or func in self._called or func in self.ctor_sites):
                    self.frames.append((lineno, func, _CALLED))
            if "raise " in stripped:
                m = _RAISE_RE.match(stripped)
                if m:
                    literal = " ".join(a or b for a, b in _STRING_RE.findall(m.group("rest")))
                    self.raise_line = self.last_raise = (lineno, m.group("type"), literal)
            elif stripped.startswith("assert ") and "," in stripped:
                # `assert cond, "message"`: what AssertionError would say
                m = _ASSERT_RE.match(stripped)
                if m:
                    literal = " ".join(a or b for a, b in _STRING_RE.findall(m.group("rest")))
                    self.raise_line = self.last_raise = (lineno, "AssertionError", literal)
            return
        if 'File "' in stripped and not stripped.startswith("File") and (
                self.open_tb is not None or "Traceback (most recent call last)" in stripped):
            inline = [(lineno, m.group("func"), m.group("path")) for m in _INLINE_FRAME_RE.finditer(stripped)]
            if inline:
                if self.open_tb is None or stripped.startswith("Traceback (most recent call last)"):
                    self.open_tb = Fact(lineno, stripped[:200], "a traceback starts here (flattened onto one line)")
                    self.frames = []
                    self._tb_whole, self._tb_vllm = stripped.startswith("Traceback (most recent call last)"), False
                if not self._tb_vllm and _names_vllm(stripped):
                    self._tb_vllm = True
                self.frames.extend(inline)
                self._calls_above_last = self._line_calls = []  # a flattened traceback shows no source lines
                self.last_tb = self.frames
                self.last_raise = None
                if not _raises(stripped.rsplit("^", 1)[-1].strip()):
                    return
        if stripped.startswith("Traceback (most recent call last)"):
            if not (self.open_tb is not None and len(self.frames) == 1 and self.frames[0][2] == _METHOD):
                self.frames = []  # (a worker's method line above stays the outermost frame)
            self.open_tb = Fact(lineno, stripped, "a traceback starts here")
            self.last_tb = self.frames
            self.last_raise = None
            self.tb_api = self._api_process()
            self._tb_whole, self._tb_vllm = True, False
            self._line_calls = []
            return
        if stripped[:1] in "^~" and not stripped.strip("^~ "):
            return  # carets under a source line
        if level not in ("INFO", "DEBUG", "WARNING") and _raises(stripped):
            self.open_tb = None  # the traceback ended with its exception
            self.failure = Fact(lineno, stripped, "error")
            if "OutOfMemoryError" in stripped or ("out of memory" in stripped and _DEVICE_OOM_RE.search(stripped)):
                self.device_oom = self.failure
            if self._tb_whole and not self._tb_vllm and len(self.foreign_tb) < 64:
                owner = frames_owner(self.frames)
                if owner:
                    self.foreign_tb[lineno] = owner
            self._tb_whole = False
        elif level in ("ERROR", "CRITICAL"):
            self.failure = Fact(lineno, stripped, "error")
            if "method" in stripped:
                m = _METHOD_RE.search(stripped)
                if m and self.open_tb is None:
                    self.open_tb = Fact(lineno, stripped, "a worker failed in this method; its traceback is not in the paste")
                    self.frames = [(lineno, m.group(1), _METHOD)]
                    self.last_tb = self.frames
                    self.last_raise = None
        # a markdown table's row is a person's summary (a column headed "Available KV cache memory"): their
        # words, never a step the log reached nor its numbers
        table = stripped[:1] == "|" and stripped[-1:] == "|" and stripped.count("|") >= 3
        self._startup_and_milestones(lineno, stripped, level, table)

    def _startup_and_milestones(self, lineno: int, text: str, level: str | None, table: bool = False) -> None:
        if table:
            self._said(lineno, text, level)
            return
        for kind, words in _STARTUP:
            if words in text:
                if kind in self.current.kinds or self.marked == 0:
                    self.startups.append(Startup(lineno))
                    self.marked += 1
                    self.stage = self.step = self.stage_at = self.phase = None
                    self.open_tb = None
                self.current.kinds.add(kind)
                break
        cur = self.current
        for words, step in _PHASE_LINES:
            if words in text:
                self.phase = (lineno, text, step)
        if any(w in text for w in MILESTONE_WORDS):
            for words, stage, step in MILESTONES:
                if words in text:
                    self.stage, self.step, self.stage_at = stage, step, (lineno, text)
                    self.phase = (lineno, text, step)
                    if step == "KV cache sizing":
                        cur.kv_sizing = Fact(lineno, text, "vLLM measured the memory left for the KV cache")
                        cur.kv_sized = False
                    elif step == "KV cache sized":
                        cur.kv_sized = True
                    elif step == "server launched":
                        self.launched_at = lineno
                    break
        if any(g in text for g in _NUMBER_GATES):
            for name, gate, rx in _NUMBER_RES:
                if gate not in text:
                    continue
                m = rx.search(text)
                if not m:
                    continue
                value = to_number(m.group(1))
                if value is None:
                    continue
                fact = Fact(lineno, text, "")
                # each worker reports its own room (TP ranks one after another): the least is the one that fails
                if name in _LEAST_WINS and name in cur.numbers and cur.numbers[name][0] <= value:
                    break
                cur.numbers[name] = (value, fact)
                if name in ("concurrency", "sleep_freed_gib"):
                    second = to_number(m.group(2))
                    if second is not None:
                        cur.extra[name + "_x"] = (second, fact)
        if any(g in text for g in _HOST_GATES):
            for rx, strong, says in _HOST_RES:
                if rx.search(text):
                    if len(self.host) < 8:
                        self.host.append((Fact(lineno, text, says), strong))
                    break
        if "Aborted request" in text and lineno is not None and len(self.aborts) < 8:
            self.aborts.append((lineno, len(self.startups) - 1, text))
        if ("died" in text or "Dead" in text) and _DIED_RE.search(text):
            self.died = Fact(lineno, text, "a wrapper says the engine, a worker or a Ray actor died: it reports the kill, not why")
        self._said(lineno, text, level)

    def _said(self, lineno: int, text: str, level: str | None) -> None:
        """What the person's words and the lines quoting them say: an OOM, a memory space, a cause."""
        cur = self.current
        if level is None and _says_oom_gate(text) and _SAYS_OOM_RE.search(text) and not _raises(text):
            cur.says_oom = Fact(lineno, text, "the person who pasted this, or a line they quote, says it ran out of memory")
        if "ut of memory" in text:
            self._oom_head = True
        elif cur.says_oom is None and not self._oom_head and "by PyTorch" in text and _TORCH_OOM_TAIL_RE.search(text) \
                and not _raises(text):
            # the end of PyTorch's out-of-memory message, its head cut off (a banner showing a log's last
            # characters): only that message words it so
            cur.says_oom = Fact(lineno, text, "this is the end of PyTorch's out-of-memory message (its first words, "
                                              "with the device, are cut off)")
        if self.says_space is None and ("mem" in text or "MEM" in text) \
                and ("smem" in text.lower() or "vmem" in text.lower()) and _SAYS_SPACE_RE.search(text):
            self.says_space = Fact(lineno, text, "names a TPU on-chip memory space (SMEM/VMEM)")
        named = False
        for words, eid, rx, says in _SAYS_LINES:
            if words in text and len(self.said) < 4 and rx.search(text):
                self.said.append((eid, Fact(lineno, text, says)))
                named = True
        if level is None:
            self._prose(lineno, text, named)

    def _prose(self, lineno: int, text: str, named: bool = False) -> None:
        """The person's own words: the step they name near their "OOM" (waking up, loading, serving), and
        a process killed when memory ran out (the OOM killer's or Kubernetes' kill, told in words)."""
        low = text.lower()
        if "wak" in low and _SAYS_WAKE_RE.search(text):
            self._wake_at = Fact(lineno, text, "... when sleep mode woke the engine up")
        said = self.current.says_oom
        if said is not None and self._wake_at is not None and said.line is not None and self._wake_at.line is not None \
                and abs(said.line - self._wake_at.line) <= _NEAR:
            self.says_wake = self._wake_at
        # the step named on the line of their "OOM" beats one named elsewhere ("the warm-up under-profiles
        # ..." then "the engine may later hit CUDA OOM during real speculative decoding")
        oom_here = said is not None and said.line == lineno
        # (a line a launcher passed on from a process, "(APIServer pid=1) Warning: ... sending requests to
        # the HF Hub", is that program's text: its words name no step of the person's run)
        if len(self._prose_lines) < _PROSE_LINES_MAX and (oom_here or any(w in low for w in _PROSE_STAGE_GATES)) \
                and not self._from_process():
            self._prose_lines.append((lineno, text, oom_here))
            self._prose_read = False
        # (every _PROSE_KV_RE match names "kv cache", "kv-cache", "kvcache" or max model len: an identifier
        # such as _check_enough_kv_cache_memory on a source line does not open the regex)
        if self.says_kv is None and ("kv cache" in low or "kv-cache" in low or "kvcache" in low
                                     or ("model" in low and "len" in low)) and _PROSE_KV_RE.search(text):
            self.says_kv = Fact(lineno, text, "the person says the KV cache had too little memory")
        if self.says_host is None and _PROSE_HOST_RE.search(text):
            self.says_host = Fact(lineno, text, "the person names the host's memory")
        if len(self._words) < _PROSE_LINES_MAX:
            self._words.append(text)
        # (a line that already names its entry, such as Ray's record of a worker it killed, is that entry's)
        if ("kill" in low or "杀" in text) and not named and len(self.host) < 8 and not (self.host and self.host[-1][0].line == lineno) \
                and _PROSE_KILL_RE.search(text) and _PROSE_MEM_RE.search(text):
            self.host.append((Fact(lineno, text, "the person says the process was killed as memory ran out"), False))

    # --- what the facts say ---------------------------------------------------------------------

    @property
    def says_device(self) -> bool:
        """The person names an accelerator or its memory."""
        return any(_PROSE_DEVICE_RE.search(text) for text in self._words)

    @property
    def prose_stage(self) -> tuple[str, Fact] | None:
        """(stage, fact) the person's words name: the first line that names a step, unless a later one
        names it on the line of their "OOM" (that one wins)."""
        if self._prose_read is not False:
            return self._prose_read
        found, on_oom = None, False
        for lineno, text, oom_here in self._prose_lines:
            if found is None or (oom_here and not on_oom):
                # an account runs in time order ("it loads fine ... then you send your first request and
                # it crashes"): the last step a line names is the one the failure came in
                # a function of vLLM's they name on the line of their "OOM" (`capture_model()` OOMed at
                # startup) is the step in the code, which words name less exactly
                called = _called_stage(text) if oom_here and "(" in text else None
                if called is not None:
                    found, on_oom = (called[0], Fact(lineno, text, f"the person names {called[1]}(), which runs "
                                                                   f"{_WHEN[called[0]]}")), True
                    continue
                m = None
                for m in _PROSE_STAGE_RE.finditer(text):
                    pass
                if m:
                    found = (m.lastgroup, Fact(lineno, text, f"the person says it happened {_PROSE_SAYS[m.lastgroup]}"))
                    on_oom = oom_here
        self._prose_read = found
        return found

    @property
    def truncated(self) -> bool:
        """The input ends inside a traceback: its exception line was cut off."""
        return self.open_tb is not None

    def values(self) -> dict[str, float]:
        """The last start-up's numbers under the names fix templates use (kvkb.params)."""
        num = {k: v for k, (v, _) in self.current.numbers.items()}
        out = {k: num[k] for k in ("max_model_len", "available_kv_gib", "gpu_memory_utilization", "total_gib") if k in num}
        if "kv_tokens" in num:
            out["kv_tokens"] = num["kv_tokens"]
        elif num.get("device_blocks", 0) > 0:
            out["kv_tokens"] = num["device_blocks"] * (num.get("block_size") or 16)
        return out

    def deepest(self) -> tuple[int, str, str] | None:
        """The deepest frame of the last traceback that names a function we know something about.
        PyTorch's frames that move a module onto the device count as TORCH_MOVE."""
        tb = self.last_tb
        # a last frame whose name the cut shortened ("in collectiv" under "collective_rpc(") is that call
        # itself, no frame below it
        last_cut = bool(tb) and tb[-1][2] != _CALLED and any(
            c != tb[-1][1] and c.startswith(tb[-1][1]) for c in self._calls_above_last)
        deeper = False  # a frame of the file's own is shown below this one
        for k in range(len(tb) - 1, -1, -1):
            frame = tb[k]
            if frame[2] == _CALLED:
                if deeper:
                    # a call read off a source line says what ran next only where the paste stops; below it,
                    # the next frame is that call, and its path says whose function it is (verl's main(), not vLLM's)
                    continue
            elif k < len(tb) - 1 or not last_cut:
                deeper = True
            if frame[1] in _HINT_FUNCS or (frame[1] in self._called and _vllm_frame(frame[2])) \
                    or (frame[1] in self.ctor_sites and frame[2] == _CALLED):
                return frame
            if any(frame[1] in funcs and path in frame[2].replace("\\", "/") for path, funcs in _TORCH_MOVE_FRAMES):
                return (frame[0], TORCH_MOVE, frame[2])
        return None

    def compute_frame(self) -> tuple[int, str, str] | None:
        """The deepest frame of the last traceback in vLLM's model code (a model's, a layer's or an
        attention op's function) when no frame is one the callee table knows: the model's forward pass."""
        for frame in reversed(self.last_tb):
            path = frame[2].replace("\\", "/")
            if any(p in path for p in _COMPUTE_PATHS) and _vllm_frame(frame[2]):
                return frame
        return None

    def frame_device(self) -> str | None:
        """The accelerator the last traceback's files name (vllm_ascend, xpu_worker.py, torch_npu), if any."""
        for _, _, path in reversed(self.last_tb):
            low = path.lower()
            for words, device in _DEVICE_PATHS:
                if any(w in low for w in words):
                    return device
        return None

    def device(self, layout: bool = True) -> str | None:
        """The accelerator the traceback's files name, else the one the log names most, else the one whose
        official container image lays vLLM out where the traceback's files are (none: CUDA/ROCm)."""
        dev = self.frame_device()
        if dev is None and self.devices:
            dev = max(sorted(self.devices), key=lambda d: self.devices[d])
        if dev is None and layout and not self.gpu_platform:
            dev = self.layout_device()  # only for 'likely' answers (engine's confident ones pass layout=False)
        return dev

    def layout_device(self) -> str | None:
        """The accelerator whose container image puts vLLM's source where the last traceback's files are
        (vllm-ascend's images clone vLLM to /vllm-workspace/vllm and install it from there; vLLM's own
        images install the wheel into site-packages). Weaker than any device the log names."""
        for _, _, path in reversed(self.last_tb):
            for part, device in _IMAGE_LAYOUTS:
                if part in path:
                    return device
        return None

    def cut_failure(self) -> Fact | None:
        """The paste stops inside its failure: in a traceback before its exception line, or at an ERROR
        line that names no exception (`ERROR ... Error execut`, a worker's "while processing method")."""
        if self.open_tb is not None:
            return Fact(self.open_tb.line, self.open_tb.text, "the paste ends inside this traceback, before its exception line")
        f = self.failure
        if f is not None and f.line is not None and f.line == self.last_at and not _raises(f.text):
            return Fact(f.line, f.text, "the paste ends at this error line, before the error it reports")
        return None

    def frame_stage(self) -> str | None:
        """The stage the last traceback's frames show (segment's cues, most specific first), else the
        stage the log had reached."""
        found: set[str] = set()
        for _, func, path in self.last_tb:
            found |= cues_of(func) | {cue for part, cue in _PATH_CUES if part in path}
        at = None if _only_rpc_loop(self, found) else stage(found)
        if at is None and self.step in _LAUNCH_STEPS and self.prose_stage is not None:
            return self.prose_stage[0]  # a launch command is the log's only step: the person's words say more
        return at or self.stage


SLEEP_FREED_NOTHING = 0.01  # GiB: "freed 0.00 GiB" as vLLM rounds it

# PyTorch's out-of-memory text: what it asked for, then what the device had free when it gave up
# ("Tried to allocate 20.00 MiB. GPU 7 has a total capacity of 79.11 GiB of which 66.43 GiB is free";
# older: "(GPU 0; 14.75 GiB total capacity; ...; 11.06 MiB free; ...)"); a number has a digit before any
# point (a paste's ". MiB" must not reach float())
_ASKED_RE = Lazy(r"Tried to allocate (\d+(?:\.\d+)?) ?([KMGT]iB)")
_FREE_RE = Lazy(r"(?:of which|;) ?(\d+(?:\.\d+)?) ?([KMGT]iB) (?:is )?free")
_GIB = {"KiB": 1 / (1 << 20), "MiB": 1 / 1024, "GiB": 1.0, "TiB": 1024.0}
ROOMY_FREE_GIB = 1.0  # a device with at least this much free...
ROOMY_RATIO = 4.0  # ...and this many times the request did not run out: cudaMalloc would have found room


def room_left(message: str) -> tuple[float, float] | None:
    """(GiB asked, GiB free) when an out-of-memory message says the device had far more free than was
    asked: the caching allocator raises only after cudaMalloc fails twice, and cudaMalloc does not fail
    for want of memory with that much free. A limit or another allocator refused it (a per-process memory
    fraction, sleep mode's CuMemAllocator, a driver error reported as out of memory). None otherwise."""
    if "Tried to allocate" not in message:
        return None
    asked = _ASKED_RE.search(message)
    free = _FREE_RE.search(message, asked.end()) if asked else None
    if not free:
        return None
    a = float(asked.group(1)) * _GIB[asked.group(2)]
    f = float(free.group(1)) * _GIB[free.group(2)]
    return (a, f) if f >= ROOMY_FREE_GIB and f >= ROOMY_RATIO * a else None


# and what it counts in private pools: CUDA graphs' memory (or a torch.cuda.MemPool's, sleep mode's)
_POOL_RE = Lazy(r"(\d+(?:\.\d+)?) ?([KMGT]iB) allocated in private pools")


def pool_gib(message: str) -> tuple[float, str] | None:
    """(GiB, as printed) a PyTorch out-of-memory message counts in private pools, None where it counts none."""
    pool = _POOL_RE.search(message) if "private pools" in message else None
    return (float(pool.group(1)) * _GIB[pool.group(2)], f"{pool.group(1)} {pool.group(2)}") if pool else None


def _fmt(x: float) -> str:
    return f"{x:g}"


# files that run on one accelerator only
_DEVICE_PATHS = ((("vllm_ascend", "torch_npu", "npu_worker", "npu_model_runner"), "npu"),
                 (("xpu_worker", "xpu_model_runner", "intel_extension_for_pytorch", "/xpu/"), "xpu"),
                 (("habana", "hpu_worker", "hpu_model_runner", "vllm_gaudi"), "hpu"),
                 (("torch_xla", "tpu_worker", "tpu_model_runner", "tpu_inference"), "tpu"))
# where a platform's official container image installs vLLM's source (frames' paths): vllm-ascend's
# Dockerfiles `git clone ... /vllm-workspace/vllm` and `pip install -e /vllm-workspace/vllm/`
_IMAGE_LAYOUTS = (("/vllm-workspace/vllm/vllm/", "npu"),)
# vLLM's files that run the model's forward pass (the model, its layers, the attention ops)
_COMPUTE_PATHS = ("/model_executor/models/", "/model_executor/layers/", "/attention/", "/v1/attention/")
FORWARD = "forward"  # the callee table's entry for the model's forward methods
HOST_MEMORY = "category:host-memory"  # resolved by the engine to the host-memory entries that fit best
_CALLED = "called from the line above"  # a frame read off a source line's call
_RUNTIME_PATHS = ("/torch/", "/triton/")  # a runtime's own frames: what their lines call is the runtime's


def _runtime_frame(path: str) -> bool:
    """A frame in PyTorch's or Triton's own code (Windows paths too)."""
    p = path.replace("\\", "/")
    return any(r in p for r in _RUNTIME_PATHS)


# a line that stands for lines the person left out (a length check first: hashing every long line costs)
_ELISION_MAX = 12
_ELISIONS = frozenset(("...", "…", "....", "[...]", "(...)", "<...>", "[…]", "(…)", "<snip>", "[snip]", "[snipped]",
                       "# ...", "...snip...", "<truncated>", "[truncated]"))


def host_facts(sc: Scanner) -> list[Fact]:
    """The host-RAM kill facts, when they say enough: a strong one (the OOM killer, OOMKilled, exit 137,
    Ray's memory monitor), or a bare SIGKILL under a wrapper saying the engine or a worker died, or
    with no error after it."""
    if not sc.host:
        return []
    strong = [f for f, s in sc.host if s]
    if strong:
        other = [Fact(None, "", f"the paste shows {sc.other_program!r} and never vLLM: another program's "
                                f"memory may have run out; if vLLM ran too, paste its log")] \
            if sc.other_program and not sc.vllm_seen else []
        return strong[:3] + ([sc.died] if sc.died else []) + other
    if sc.device_oom is not None and all(f.says.startswith("the person says") for f, _ in sc.host):
        return []  # "the OOM killed the engine" about a device OOM in view is no host-RAM kill
    weak = sc.host[-1][0]
    if sc.died is not None:
        return [weak, sc.died]
    if sc.failure is None or (sc.failure.line or 0) <= (weak.line or 0):
        return [weak]  # the shell's "Killed" is how the log ends: nothing else failed after it
    return []


# packages whose frames run under any program (the runtime, kernels, the standard library's helpers,
# web servers): a traceback of only these shows no program of its own
RUNTIME_PACKAGES = frozenset(("torch", "torch_npu", "torch_xla", "jax", "jaxlib", "triton", "numpy", "ray", "safetensors",
                               "flash_attn", "xformers", "flashinfer", "cupy", "nccl", "uvicorn", "uvloop", "starlette",
                               "fastapi", "anyio", "concurrent", "asyncio", "multiprocessing", "threading", "runpy",
                               "importlib", "functools", "contextlib", "site-packages", "dist-packages", "_pytest",
                               "pluggy", "IPython", "ipykernel", "tornado", "click", "typer", "fire"))
_PKG_RE = Lazy(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z_][\w.-]*?)(?:[/\\]|\.py$)")


def _names_vllm(text: str) -> bool:
    """vLLM's name in a traceback's frame or source line (a path, an import, the engine's classes)."""
    return any(w in text for w in _VLLM_NAMES)


# a paste shows vLLM when it names it (a path, a logger, the banner, a command) or its engine process
# (tpu_inference: vLLM's TPU backend); a traceback's source line also by the engine's classes
VLLM_WORDS = ("vllm", "vLLM", "VLLM", "Vllm", "EngineCore", "tpu_inference")
_VLLM_NAMES = VLLM_WORDS + ("LLM(", "LLMEngine")


# frameworks that run vLLM inside their own processes (RL rollouts, evaluation, fine-tuning's generation):
# a traceback through their code is no other program's run
_VLLM_EMBEDDERS = frozenset(("verl", "openrlhf", "easyr1", "llamafactory", "nemo_rl", "skyrl", "skyrl_train", "areal",
                             "prime_rl", "trl", "lighteval", "lm_eval", "swift", "roll", "slime", "marin"))


def frames_owner(frames: list[tuple[int, str, str]], embedders: bool = True) -> str | None:
    """The program a traceback's frames belong to when none is vLLM's: its first frame outside the
    runtime and the standard library (an installed package's name, else the script's file name).
    `embedders=False`: a framework that runs vLLM is none (asked of a cut traceback in a paste that never
    names vLLM: its run may well be vLLM's; an error the trainer's own frames raised is still the trainer's)."""
    for _, _, path in frames:
        if not path or path[:1] == "<" or path in (_CALLED, _METHOD):
            continue
        p = path.replace("\\", "/")
        if not embedders and any(part in _VLLM_EMBEDDERS for part in p.lower().split("/")[:-1]):
            return None
        m = _PKG_RE.search(p)
        if m:
            pkg = m.group(1).split(".", 1)[0]
            if pkg not in RUNTIME_PACKAGES and not pkg.startswith("_"):
                return pkg
            continue
        if "/lib/python" in p or "/lib64/python" in p or "\\lib\\" in path.lower():
            continue  # the standard library
        return p.rsplit("/", 1)[-1]
    return None


def _vllm_frame(path: str) -> bool:
    """A frame in vLLM's own code (the table is read from vLLM's code), or a call on a source line:
    the package a site-packages path installs (vllm, vllm_ascend, an egg), else a `vllm` / `vllm_*`
    directory in a source checkout; a directory the user named vllm holding torch's files is not it."""
    if path == _CALLED:
        return True
    if "vllm" not in path and "tpu_inference" not in path:
        return False
    p = path.replace("\\", "/")
    cut = max(p.rfind("site-packages/"), p.rfind("dist-packages/"))
    if cut >= 0:
        pkg = p[cut + 14:].split("/", 1)[0]
        return pkg.startswith("vllm") or pkg == "tpu_inference"
    return any(part == "vllm" or part.startswith("vllm_") or part == "tpu_inference" for part in p.split("/")[:-1])


def stage_oom(sc: Scanner, stage_entries: dict, at: str | None) -> str | None:
    """The device out-of-memory entry of a stage on the paste's accelerator (NPU, XPU, HPU, TPU: their
    own entry whatever the stage; CUDA/ROCm: the stage's)."""
    device = sc.device()
    at = at or "startup"
    return (stage_entries.get("device:" + device) if device else None) or stage_entries.get(at) or _DEFAULT_OOM.get(at)


# without the engine's table (a Scanner used on its own): the CUDA entries of each stage
_DEFAULT_OOM = {"startup": "cuda-oom-during-startup", "cudagraph": "cuda-oom-during-cudagraph-capture",
                "serving": "cuda-oom-during-serving"}


def _callee_hints(sc: Scanner, frame: tuple, where: str, cut: Fact, stage_entries: dict,
                  table: dict | None = None, oom_stage: str | None = None, says: str | None = None,
                  rank: float = 1.5, first: tuple = ()) -> list[Hint]:
    """A paste cut inside a vLLM function: the entries whose messages that function's callees raise
    (matcher/callees.json, read from vLLM's code), plus the device OOM of the stage the frames show
    (PyTorch raises it in any allocation, which no vLLM source line names), ranked by how often the
    corpus shows each. `table`/`oom_stage`/`says`: the same for a step of start-up (phase_hints)."""
    phase_table = table is not None
    table = sc._called[frame[1]] if table is None else table
    weights = sc.callees.get("weights", {})
    ids = dict(table)
    frames = oom_stage or sc.frame_stage()
    # the code below this function allocates device memory when it raises a device OOM entry's message;
    # that entry then stands for PyTorch's OOM of this traceback's stage and device (the wording vLLM
    # wraps, as in the sampler warm-up, is one stage's; PyTorch's own is raised in any)
    # a function below which vLLM only checks the KV capacity (check_enough_kv_cache_memory) allocates
    # nothing on the device: PyTorch's OOM is no answer there
    cats = sc.callees.get("categories", {})
    if sc._allocates and not phase_table:
        # the table says which functions call code that allocates device memory (derive_callees.ALLOCATING)
        allocates = frame[1] in sc._allocates
    else:
        allocates = not ids or any(cats.get(e) != "kv-capacity" for e in ids)
    # ... and it does when vLLM's own code below it raises a device OOM entry's wording (the sampler
    # warm-up catches PyTorch's OOM and raises its own message)
    if not allocates and not phase_table and any(e in table for e in set(stage_entries.values())):
        allocates = True
    # ... and it does when it is the model's forward code (a layer's apply, an attention op): every
    # tensor op there allocates its output, whatever else a function of that name reaches
    if not allocates and not phase_table and _vllm_frame(frame[2]) \
            and any(p in frame[2].replace("\\", "/") for p in _COMPUTE_PATHS):
        allocates = True
    # ... and when the traceback goes on below it into PyTorch's or Triton's own code (a module's forward,
    # a CUDA graph's capture, a kernel launch): that code allocates, whatever the table says of its callees
    if not allocates and not phase_table and frame in sc.last_tb:
        below = sc.last_tb[sc.last_tb.index(frame) + 1:]
        allocates = any(_runtime_frame(f[2]) for f in below)
    # V1's API server process runs no model: the engine allocates in its own process (EngineCore), so a
    # traceback in the API server is no device OOM, whatever the static call graph reaches
    api = sc.tb_api and not phase_table and allocates
    if api:
        allocates = False
    for e in set(stage_entries.values()):
        ids.pop(e, None)
    dropped = _cannot_end(sc, frame, ids, phase_table)
    oom = stage_oom(sc, stage_entries, frames)
    if oom and allocates:
        ids[oom] = list(table.get(oom, []))
    # how often real pastes whose traceback runs through this very function show each (init_device: its
    # free-memory check), then how often real pastes show each at all
    through = {} if phase_table else dict(sc.callees.get("through", {}).get(frame[1], {}))
    # the device's OOM is the stage's OOM on another accelerator: it ranks as often as PyTorch's OOM at that stage
    weight = dict(weights)
    if oom and oom != stage_entries.get(frames or "startup"):
        cuda = stage_entries.get(frames or "startup", "")
        weight[oom] = max(weight.get(oom, 0), weight.get(cuda, 0))
        through[oom] = max(through.get(oom, 0), through.get(cuda, 0))
    # what the frame itself means (FRAME_HINTS: the V0 scheduler's swap-out) before how often pastes show each
    first = tuple(stage_oom(sc, stage_entries, e[4:]) if e.startswith("oom:") else e for e in first)
    ranked = sorted(ids, key=lambda e: (first.index(e) if e in first else len(first), -through.get(e, 0),
                                        -weight.get(e, 0), -len(ids[e]), e))
    if not ranked:
        return []

    def releases(e: str) -> str:
        rel = ids[e]
        return f"in vLLM {', '.join(rel)}" if rel else "PyTorch's own allocation error"

    names = "; ".join(f"{e} ({releases(e)})" for e in ranked)
    seen = f" failing inside {frame[1]}, then all real pastes," if any(through.get(e) for e in ranked) else ""
    says = (says or f"the paste stops inside {frame[1]}: the code it calls") + \
        f" can raise only these entries' errors: {names} (ranked by how often real pastes{seen} show each); paste the lines after the cut to tell"
    if dropped:
        says += f" (left out: {dropped})"
    if api:
        says += " (left out: a device out-of-memory error: this traceback runs in the API server process, which holds no model)"
    facts = [Fact(frame[0], f"in {frame[1]} ({where})" if where else frame[2], says), cut]
    return [Hint(e, "likely", facts, rank - 0.1 * k) for k, e in enumerate(ranked)]


def _cannot_end(sc: Scanner, frame: tuple, ids: dict, phase_table: bool) -> str:
    """Take out of a cut traceback's callee table what cannot end it: an entry whose every wording is a
    log line (a warning ends no traceback: V0's scheduler logs a too-long prompt and goes on), and,
    below a frame of vLLM's V1 engine (vllm/v1/), an entry only the V0 engine has (V1 never swaps to CPU).
    Returns what was left out, in words."""
    meta = sc.entry_meta
    if not meta or sc.open_tb is None:
        return ""
    v1 = not phase_table and "/v1/" in frame[2].replace("\\", "/")
    logs, v0 = [], []
    for e in list(ids):
        raises, engines = meta.get(e, (True, frozenset()))
        if not raises:
            logs.append(e)
        elif v1 and engines == _V0_ONLY:
            v0.append(e)
        else:
            continue
        del ids[e]
    parts = ([f"{', '.join(logs)}: only ever logged, never raised"] if logs else []) + \
        ([f"{', '.join(v0)}: V0 engine only, and {frame[1]} is V1's"] if v0 else [])
    return "; ".join(parts)


_V0_ONLY = frozenset(("v0",))


def frames_stage(sc: Scanner) -> str | None:
    """The stage the cut traceback's own frames show (segment's cues; engine constructors: start-up)."""
    found: set[str] = set()
    for _, func, path in sc.last_tb:
        found |= cues_of(func) | {cue for part, cue in _PATH_CUES if part in path}
        if func in _STARTUP_FRAMES or (func == "__init__" and any(p in path for p in _CONSTRUCTOR_PATHS)):
            found.add("startup")
    return None if _only_rpc_loop(sc, found) else stage(found)


# V1's worker runs every call the engine makes in this loop, the start-up ones (sizing, allocating and
# warming the KV cache, capturing graphs) too: a traceback showing no deeper frame says serving only
# once the log has left start-up
_RPC_LOOPS = frozenset(("worker_busy_loop",))


def _only_rpc_loop(sc: Scanner, found: set[str]) -> bool:
    return found == {"serving"} and sc.stage in ("startup", "cudagraph") \
        and all(f in _RPC_LOOPS or "serving" not in cues_of(f) for _, f, _ in sc.last_tb)


def _outer(func: str) -> bool:
    """A frame that constructs the engine or its parts (a class called by name, an engine constructor)."""
    return func[:1].isupper() or (func in _STARTUP_FRAMES and func not in _STEP_FRAMES) or func in ("__init__", "__post_init__")


# start-up frames that are one step, not the whole start-up: their callee table is the better answer
_STEP_FRAMES = frozenset(("_initialize_kv_caches", "_init_cache", "init_device"))


def _check_passed(st: Startup) -> bool:
    """The log's own numbers show the KV cache holds a full-length request (and is not empty)."""
    num = {k: v for k, (v, _) in st.numbers.items()}
    mml = num.get("max_model_len")
    tokens = num.get("kv_tokens")
    if tokens is None and num.get("device_blocks") is not None:
        tokens = num["device_blocks"] * (num.get("block_size") or 16)
    return mml is not None and tokens is not None and tokens > 0 and tokens >= mml


def _has_blocks(st: Startup) -> bool:
    """The log's own numbers show a KV cache that is not empty (blocks, tokens or GiB above zero)."""
    num = {k: v for k, (v, _) in st.numbers.items()}
    return any(num.get(k) is not None and num[k] > 0 for k in ("device_blocks", "kv_tokens", "available_kv_gib"))


_LAUNCH_STEPS = frozenset(("server launched",))  # segment.MILESTONES' step for a command that starts the server


def phase_hints(sc: Scanner, stage_entries: dict) -> list[Hint]:
    """No error line, and no frame that says what failed: what ran at the step the log reached.

    A paste that stops in its failure (a cut traceback, a cut ERROR line) after a start-up step: the
    entries the functions of the next step can raise (the callee table), plus PyTorch's OOM of that
    stage on the paste's device, ranked by how often real pastes show each. A person who says it ran
    out of memory, with the stage the log or the frames show: that stage's device OOM. Likely, never
    confident, with the request for the lines after the cut."""
    st = sc.current
    said = next((s.says_oom for s in reversed(sc.startups) if s.says_oom is not None), None)  # prose above a restart too
    cut = sc.cut_failure()
    frames_at = frames_stage(sc) if cut is not None and sc.open_tb is not None else None
    phase = sc.phase
    step = phase[2] if phase else None
    out: list[Hint] = []
    fits = step in _PHASE_FUNCS and (frames_at is None or frames_at == _PHASE_FUNCS[step][1]
                                     or (frames_at, _PHASE_FUNCS[step][1]) == ("startup", "cudagraph"))
    if cut is not None and (fits or frames_at is not None):
        if fits:
            funcs, at = _PHASE_FUNCS[step]
        else:  # the frames say where it was, the log's steps do not
            funcs, at, step = _STAGE_FUNCS[frames_at], frames_at, f"{frames_at} (from the traceback's frames)"
            phase = (cut.line, cut.text, step)
        table: dict[str, list[str]] = {}
        for f in funcs:
            for e, rel in sc._called.get(f, {}).items():
                table.setdefault(e, [])
                table[e] = sorted(set(table[e]) | set(rel), key=lambda v: tuple(int(x) for x in v.split(".") if x.isdigit()))
        first: tuple = ()
        if step == "KV cache sizing" and _check_passed(st):
            # vLLM's capacity check compares exactly these numbers: it passed, what came after failed
            for f in ("check_enough_kv_cache_memory", "raise_if_cache_size_invalid"):
                for e in sc._called.get(f, {}):
                    table.pop(e, None)
        elif step == "KV cache sizing" and fits:
            # the sizing is printed, the capacity check is what runs right after (V0: initialize_cache ->
            # raise_if_cache_size_invalid before it allocates; V1: get_kv_cache_config before the cache
            # size line): its errors first; an empty cache only when the log's numbers leave room for one
            first = tuple(e for e in _HINT_FUNCS["check_enough_kv_cache_memory"][2]
                          if e != "no-memory-for-cache-blocks" or not _has_blocks(st))
        says = (f"the log reached '{step}' and stops in a failure: what runs next ({', '.join(funcs)})")
        out = _callee_hints(sc, (phase[0], step, phase[1]), "", cut, stage_entries, table, at, says, rank=1.4, first=first)
        if out and said is not None:
            for h in out:
                h.facts = h.facts + [said]
        return out
    if said is None or (sc.other_program and not sc.vllm_seen):
        return out  # (another program's paste: its "out of memory" says nothing of vLLM's stages)
    low = said.text.lower()
    host_oom = ("内存" in said.text or "cpu" in low or "host" in low or "system" in low or "ram" in low) \
        and _HOST_OOM_RE.search(said.text) is not None
    if (host_oom or (sc.says_host is not None and not sc.says_device and not sc.devices and not sc.gpu_platform)) \
            and sc.device_oom is None and cut is None:
        # an out-of-memory they tell of as the host's ("CPU out of memory", 内存oom), or naming the host's
        # memory and no accelerator anywhere
        out.append(Hint(HOST_MEMORY, "likely", [said, sc.says_host if not host_oom else
                                                Fact(said.line, said.text, "the person says the host's memory ran out"),
                                                Fact(None, "", "no error line is in the paste: paste the lines where it failed to tell")], 1.0))
        return out
    # where it was: the traceback's frames, the log's last step, a start-up line with no later step,
    # the step the person names; a device other than CUDA/ROCm has one OOM entry whatever the stage
    where: Fact | None = None
    at = None
    # a launch command is the log's only step: the step the person names says more
    launched_only = sc.step in _LAUNCH_STEPS and sc.prose_stage is not None
    if frames_at is not None:
        at, where = frames_at, Fact(cut.line if cut else None, cut.text if cut else "", f"the traceback's frames are {frames_at}")
    elif launched_only:
        at, where = sc.prose_stage
    elif sc.stage_at is not None and sc.stage is not None:
        at, where = sc.stage, Fact(sc.stage_at[0], sc.stage_at[1], f"the last step the log reached: {sc.step}")
    elif sc.marked:
        first = sc.current.line
        at, where = "startup", Fact(first, "", "the log shows a start-up and no later step")
    elif sc.prose_stage is not None:
        at, where = sc.prose_stage
    else:
        dev = sc.device()
        if dev is not None and stage_entries.get("device:" + dev):
            at, where = "startup", Fact(None, "", f"the log names the {dev.upper()}: its out-of-memory error is one entry at any stage")
        elif (sc.says_device or sc.devices or sc.gpu_platform or sc.vllm_seen) and sc.says_host is None:
            # an accelerator's OOM they tell of and no step at all: most real ones happen at start-up
            # (the corpus's counts: callees.json weights), so that is the best guess, and says so
            weights = sc.callees.get("weights", {})
            at = max(_WHEN, key=lambda st: weights.get(stage_entries.get(st) or _DEFAULT_OOM[st], 0))
            where = Fact(None, "", f"no step of the run is in the paste; most real out-of-memory errors happen "
                                   f"{_WHEN[at]}, so that is a guess")
    if at is None:
        return out
    oom = stage_oom(sc, stage_entries, at)
    if oom:
        facts = [said, where] + ([cut] if cut is not None else [])
        facts.append(Fact(None, "", "no error line is in the paste: paste the lines where it failed to tell"))
        out.append(Hint(oom, "likely", facts, 1.0))
    return out


SHM_SMALL = 1 << 30  # bytes: a /dev/shm below 1 GiB (Docker's default is 64 MB) is too small for NCCL across GPUs
KV_FULL_PCT = 99.95  # "KV cache usage: 100.0%" as vLLM rounds it


def _line_hints(sc: Scanner, val, fact) -> list[Hint]:
    """INFO and WARNING lines, and the person's own words, that carry the evidence when no error line does."""
    out: list[Hint] = []
    usage = val("kv_usage_pct")
    if usage is not None and usage >= KV_FULL_PCT:
        out.append(Hint("preemption-kv-cache-space", "likely",
                        [fact("kv_usage_pct", "the KV cache is full: the scheduler preempts requests (or waits) until blocks free up")], 1.8))

    def anyval(name: str) -> tuple[float, Fact] | None:  # set-up facts printed before the engine's start-up line too
        return next((s.numbers[name] for s in reversed(sc.startups) if name in s.numbers), None)

    shm, tp = anyval("shm_bytes"), anyval("tensor_parallel")
    if shm is not None and shm[0] < SHM_SMALL and tp is not None and tp[0] > 1:
        out.append(Hint("container-shm-too-small", "likely",
                        [Fact(shm[1].line, shm[1].text, f"/dev/shm holds only {_fmt(shm[0] / (1 << 20))} MiB"),
                         Fact(tp[1].line, tp[1].text, f"tensor parallel size {_fmt(tp[0])}: NCCL passes data between "
                              "the GPUs through /dev/shm")], 1.8))
    if sc.says_space is not None and sc.device() == "tpu":
        out.append(Hint(TPU_SPACE_ENTRY, "likely", [sc.says_space, Fact(None, "", "on a TPU: XLA's SMEM/VMEM limits, not its HBM")], 1.8))
    seen: set[str] = set()
    for eid, f in sc.said:
        if eid not in seen:
            seen.add(eid)
            out.append(Hint(eid, "likely", [f] + [g for e, g in sc.said if e == eid and g is not f][:1], 1.8))
    if sc.says_kv is not None and usage is None:
        at = sc.prose_stage[0] if sc.prose_stage else sc.stage
        weights = sc.callees.get("weights", {})
        # while serving a full KV cache preempts requests; at start-up vLLM's capacity check refuses to start
        ids = ("preemption-kv-cache-space",) if at == "serving" else \
            sorted(_HINT_FUNCS["check_enough_kv_cache_memory"][2], key=lambda e: -weights.get(e, 0))
        facts = [sc.says_kv] + ([sc.prose_stage[1]] if sc.prose_stage else []) + \
            [Fact(None, "", "no error line is in the paste: paste vLLM's own error line to tell which check failed")]
        out.extend(Hint(e, "likely", facts, 1.7 - 0.1 * k) for k, e in enumerate(ids))
    if sc.says_wake is not None:
        wake = _HINT_FUNCS["wake_up"][2][0]
        out.append(Hint(wake, "likely", [sc.says_wake, Fact(None, "", "no error line is in the paste: paste the lines where it failed to tell")], 1.6))
    return out


def hints(sc: Scanner, visible_error: bool, stage_entries: dict | None = None) -> list[Hint]:
    """Entries the last start-up's facts point to, best first. `visible_error`: an error line is in
    the log (then only numbers count: they say why the error happened; frames add nothing).
    `stage_entries`: stage -> the device out-of-memory entry for that stage (engine.Matcher)."""
    stage_entries = stage_entries or {}
    st = sc.current
    out: list[Hint] = []
    num = st.numbers

    def val(name: str) -> float | None:
        return num[name][0] if name in num else None

    def fact(name: str, says: str) -> Fact:
        f = num[name][1]
        return Fact(f.line, f.text, says)

    empty: list[Fact] = []
    kv = val("available_kv_gib")
    if kv is not None and kv <= 0:
        empty.append(fact("available_kv_gib", f"no memory is left for the KV cache ({_fmt(kv)} GiB)"))
    blocks = val("device_blocks")
    if blocks is not None and blocks <= 0:
        empty.append(fact("device_blocks", f"vLLM found room for {_fmt(blocks)} KV cache blocks"))
    tokens0 = val("kv_tokens")
    if tokens0 is not None and tokens0 <= 0:
        empty.append(fact("kv_tokens", "the KV cache holds no tokens at all"))
    raw = val("available_bytes")
    if raw is not None and raw <= 0:
        empty.append(fact("available_bytes", "the device reported no memory available for the KV cache"))
    conc = st.extra.get("concurrency_x")
    if empty:
        out.append(Hint("no-memory-for-cache-blocks", "likely", empty, 3.0))
    else:
        short: list[Fact] = []
        mml = val("max_model_len")
        tokens = val("kv_tokens")
        if tokens is None and blocks is not None and mml is not None:
            bs = val("block_size") or 16
            if blocks * bs < mml:
                short.append(fact("device_blocks", f"{_fmt(blocks)} blocks x {_fmt(bs)} tokens = {_fmt(blocks * bs)} tokens of KV cache"))
                short.append(fact("max_model_len", f"max_model_len is {_fmt(mml)}: one full-length request does not fit"))
        elif tokens is not None and mml is not None and tokens < mml:
            short.append(fact("kv_tokens", f"the KV cache holds {_fmt(tokens)} tokens"))
            short.append(fact("max_model_len", f"max_model_len is {_fmt(mml)}: one full-length request does not fit"))
        if conc is not None and conc[0] < 1:
            f = conc[1]
            short.append(Fact(f.line, f.text, f"maximum concurrency {_fmt(conc[0])}x: not one full-length request fits"))
        if not short and kv is not None and st.kv_sizing is not None and not st.kv_sized and sc.failure is not None \
                and (sc.failure.line or 0) >= (st.kv_sizing.line or 0) and not visible_error:
            # V1 prints the available memory, checks it against max_model_len, then prints the
            # cache size; a failure between the two is that check
            short.append(fact("available_kv_gib", f"{_fmt(kv)} GiB was left for the KV cache"))
            short.append(Fact(sc.failure.line, sc.failure.text,
                              "start-up failed right after, before vLLM printed the KV cache size"))
        if short:
            out.append(Hint("max-model-len-exceeds-kv-cache", "likely", short, 2.5))
    freed = val("sleep_freed_gib")
    held = st.extra.get("sleep_freed_gib_x")
    if freed is not None and freed < SLEEP_FREED_NOTHING and held is not None and held[0] > 0:
        out.append(Hint("sleep-mode-memory-not-released", "likely",
                        [fact("sleep_freed_gib", f"sleep mode freed {_fmt(freed)} GiB while {_fmt(held[0])} GiB stayed in use: "
                              "the memory vLLM holds was not released to the GPU")], 2.0))
    w = val("weights_gib")
    if w is not None and w <= 0 and not visible_error:
        out.append(Hint("memory-profiling-error", "likely",
                        [fact("weights_gib", "vLLM measured 0 GB for the weights: GPU memory changed under it "
                              "while it measured (another process), which breaks its memory profiling")], 2.0))
    if not visible_error:
        out.extend(_line_hints(sc, val, fact))
    host = host_facts(sc)
    if host and not visible_error:
        if sc.stage_at is not None:  # what was running when it was killed (loading weights, serving)
            host = host + [Fact(sc.stage_at[0], sc.stage_at[1], f"the last step the log reached: {sc.step}")]
        out.append(Hint(HOST_MEMORY, "likely", host, 2.2))
    if visible_error or not sc.truncated:
        if not visible_error and not out:
            out.extend(phase_hints(sc, stage_entries))
        out.sort(key=lambda h: -h.rank)
        return out
    cut = sc.cut_failure()
    if sc.last_raise is not None:
        line, typ, literal = sc.last_raise
        out.append(Hint("raise:" + typ + ":" + literal, "likely",
                        [Fact(line, f"raise {typ}({literal!r})", "the traceback stops at this raise in vLLM's source"), cut], 4.0))
    frame = sc.deepest()
    if frame is not None:
        where = frame[2].rsplit("/", 1)[-1] if "/" in frame[2] else frame[2]
        hint = _HINT_FUNCS.get(frame[1])
        if hint is None and frame[2] == _CALLED and frame[1] in sc.ctor_sites:
            # the source line constructs a class whose __init__ raises an entry's message (the KB says where)
            owners = sc.ctor_sites[frame[1]]
            facts = [Fact(frame[0], f"{frame[1]}(...)", f"the paste stops where this line constructs {frame[1]}: its "
                          f"__init__ raises {', '.join(owners)}'s error (where the KB's wording is raised)"), cut]
            out.extend(Hint(e, "likely", facts, 1.6 - 0.1 * k) for k, e in enumerate(owners))
            out.sort(key=lambda h: -h.rank)
            return out
        said = any(s.says_oom is not None for s in sc.startups)
        if hint is None and _outer(frame[1]) and (said or (sc.phase is not None and sc.phase[2] in _PHASE_FUNCS)):
            # a frame that builds the whole engine (LLM(...), from_engine_args) reaches everything start-up
            # can raise; the step the log reached says which part of start-up was running
            got = phase_hints(sc, stage_entries)
            if got:
                out.extend(got)
                out.sort(key=lambda h: -h.rank)
                return out
        if (hint is None or hint[1] != "likely") and frame[1] in sc._called:
            out.extend(_callee_hints(sc, frame, where, cut, stage_entries, first=hint[2] if hint else ()))
            out.sort(key=lambda h: -h.rank)
            return out
        funcs, tier, ids, says = hint
        facts = [Fact(frame[0], f"in {frame[1]} ({where})", says), cut]
        if tier == "possible" and st.says_oom is not None:
            tier = "likely"
            facts.append(st.says_oom)
        rank = 1.5 if tier == "likely" else 0.5
        for k, eid in enumerate(ids):
            if eid.startswith("oom:"):
                eid = stage_oom(sc, stage_entries, eid[4:]) or eid
            out.append(Hint(eid, tier, facts, rank - 0.1 * k))
    elif sc.last_raise is None and not out:
        compute = sc.compute_frame()
        if compute is not None and compute[1] != "__init__" and sc._called.get(FORWARD) and cut is not None:
            # a function of the model's forward pass the table does not name (an attention op's wrapper):
            # what the model's forward methods can raise, and PyTorch's OOM of the stage
            where = compute[2].rsplit("/", 1)[-1]
            says = f"the paste stops inside {compute[1]} ({where}), part of the model's forward pass: the code it calls"
            out.extend(_callee_hints(sc, compute, where, cut, stage_entries, dict(sc._called[FORWARD]), None, says))
        if not out:
            out.extend(phase_hints(sc, stage_entries))
    out.sort(key=lambda h: -h.rank)
    return out
