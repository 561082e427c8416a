"""Build the tiny tokenizer that stands in for Qwen2.5's 151k-token one in the reproductions.

Run with a Python that has the `tokenizers` library (the vLLM venv does):
    /work/venvs/vllm/bin/python reproductions/models/build_tokenizer.py [MODEL_DIR]

Why a tiny one: nothing may download from a hub, and the reproductions only need string prompts
to turn into valid ids (< the model's vocab_size) and generated ids to turn back into text. A
byte-level BPE covers every input string; 512 ids keep tokenizer.json small. Ids the model
generates beyond the tokenizer's vocabulary decode to nothing, which is harmless with dummy weights.
The output is deterministic, so rebuilding gives the same files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VOCAB_SIZE = 512
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Our own text, shaped like the prompts the entries use, so common words get single ids.
CORPUS = [
    "The capital of France is Paris. The capital of Italy is Rome.",
    "Explain the KV cache in one sentence. A story about a cat and a dog.",
    "Write a long essay about memory, tokens, requests and the scheduler.",
    "Hello, my name is vLLM. The future of AI is open. What is the weather today?",
    "Count from one to one hundred: one two three four five six seven eight nine ten.",
    "the of and to in is for on that with as by at from this it be are was an or not",
]


def build(model_dir: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 20, trainer=trainer)
    model_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(model_dir / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "bos_token": None,
        "model_max_length": 32768,
        "clean_up_tokenization_spaces": False,
    }
    (model_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    vocab = json.loads(json.dumps(tok.get_vocab()))
    limit = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    assert max(vocab.values()) < limit, "tokenizer ids must stay below the model's vocab_size"
    print(f"wrote {model_dir}/tokenizer.json ({tok.get_vocab_size()} ids, model vocab {limit})")


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "qwen2.5-0.5b-instruct"
    build(target)
