"""Two small synthetic vLLM releases for the atlas tests: 0.1.0 and 0.2.0, whose differences are
the kinds of drift the atlas reports (a wording changed, a flag removed, a default changed, a new
raise site about memory)."""

from pathlib import Path

from kvkb.atlas.build import add_releases
from kvkb.atlas.store import Atlas

ARGS_010 = '''
import argparse
from dataclasses import dataclass


@dataclass
class EngineArgs:
    model: str
    gpu_memory_utilization: float = 0.90
    swap_space: int = 4

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--gpu-memory-utilization", type=float)
        parser.add_argument("--swap-space", type=int)
        parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
        return parser
'''

ARGS_020 = '''
from dataclasses import dataclass

from vllm.config import CacheConfig


@dataclass
class EngineArgs:
    model: str
    gpu_memory_utilization: float = CacheConfig.gpu_memory_utilization
    kv_cache_memory_bytes: int | None = None
    enable_prefix_caching: bool = False

    @staticmethod
    def add_cli_args(parser):
        for name in ("gpu_memory_utilization", "kv_cache_memory_bytes", "enable_prefix_caching"):
            parser.add_argument(f"--{name.replace('_', '-')}")
        return parser
'''

CONFIG_020 = '''
class CacheConfig:
    gpu_memory_utilization: float = 0.92
'''

ENVS_010 = '''
import os
environment_variables = {
    "VLLM_CPU_KVCACHE_SPACE": lambda: int(os.getenv("VLLM_CPU_KVCACHE_SPACE", "4")),
    "VLLM_OLD_KNOB": lambda: os.getenv("VLLM_OLD_KNOB"),
}
'''

ENVS_020 = '''
import os
environment_variables = {
    "VLLM_CPU_KVCACHE_SPACE": lambda: int(os.getenv("VLLM_CPU_KVCACHE_SPACE", "0")),
}
'''

LLM = '''
class LLM:
    def __init__(self, model, gpu_memory_utilization=0.9, **kwargs):
        """Docstrings are not messages."""
'''

WORKER_010 = '''
import logging

logger = logging.getLogger(__name__)


def raise_if_cache_size_invalid(num_gpu_blocks):
    if num_gpu_blocks <= 0:
        raise ValueError("No available memory for the cache blocks. "
                         "Try increasing `gpu_memory_utilization` when "
                         "initializing the engine.")
    logger.warning("Only %d GPU blocks: expect preemption", num_gpu_blocks)
'''

WORKER_020 = '''
import logging

logger = logging.getLogger(__name__)


def raise_if_cache_size_invalid(num_gpu_blocks, needed):
    if num_gpu_blocks <= 0:
        msg = ("No available memory for the KV cache blocks. Raise "
               "`gpu_memory_utilization` when starting the engine.")
        raise RuntimeError(msg)
    if needed > num_gpu_blocks:
        raise ValueError(f"The KV cache needs {needed} blocks, more than the {num_gpu_blocks} blocks free")
    logger.warning("Only %d GPU blocks: expect preemption", num_gpu_blocks)
'''

CHECK_010 = '''
class SchedulerConfig:
    def verify(self, n, m):
        if n < m:
            raise ValueError(f"max_num_batched_tokens ({n}) must be at least max_num_seqs ({m}).")
'''

# from 0.2.0 the config is a pydantic dataclass: the same text is printed as a ValidationError
CHECK_020 = '''
from pydantic.dataclasses import dataclass


@dataclass
class SchedulerConfig:
    def __post_init__(self):
        if self.n < self.m:
            raise ValueError(f"max_num_batched_tokens ({self.n}) must be at least max_num_seqs ({self.m}).")
'''

# a wrapper whose value is another message (the worker's error inside the quotes), in both releases
EXECUTOR = '''
def collective_rpc(result):
    raise RuntimeError(f"Worker failed with error '{result}', please check the stack trace above for the root cause")
'''

RELEASES = {
    "0.1.0": {"vllm/engine/arg_utils.py": ARGS_010, "vllm/envs.py": ENVS_010, "vllm/entrypoints/llm.py": LLM,
              "vllm/worker/worker.py": WORKER_010, "vllm/sched.py": CHECK_010,
              "vllm/executor.py": EXECUTOR},
    "0.2.0": {"vllm/engine/arg_utils.py": ARGS_020, "vllm/config.py": CONFIG_020, "vllm/envs.py": ENVS_020,
              "vllm/entrypoints/llm.py": LLM, "vllm/worker/worker.py": WORKER_020, "vllm/sched.py": CHECK_020,
              "vllm/executor.py": EXECUTOR},
}


def fetch(version: str, workdir: Path):
    yield from sorted(RELEASES[version].items())


def build(path: Path, versions=("0.1.0", "0.2.0")) -> Atlas:
    atlas = Atlas()
    add_releases(atlas, list(versions), path=path, fetch=fetch)
    return atlas
