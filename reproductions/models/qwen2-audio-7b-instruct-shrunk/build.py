"""Build the tokenizer of the shrunk Qwen2-Audio-7B-Instruct used by the multimodal reproductions.

Run with a Python that has the `tokenizers` library (the vLLM venv does):
    .venv-vllm/bin/python reproductions/models/qwen2-audio-7b-instruct-shrunk/build.py

config.json keeps Qwen2-Audio-7B-Instruct's shape and token ids (vocab 156032, <|AUDIO|> at
151646, 128 mel bins, 1500 encoder positions, so one 30 s clip is still 750 audio tokens) but
shrinks it to 2 text layers of hidden 256 and 2 audio-encoder layers of width 128 (head dim 64:
vLLM's CPU attention rejects smaller). preprocessor_config.json is the real Whisper feature
extractor. Why Qwen2-Audio: its processor needs no torchvision, which the CPU venv does not have
(reproductions/setup-cpu-venv.sh removes the CUDA build); Qwen2-VL's vLLM module imports it.

The tokenizer is the byte-level BPE of ../build_tokenizer.py plus the model's special tokens at
their real ids, so the processor expands <|AUDIO|> into the id the model expects. `build` is
shared with ../qwen3-next-80b-a3b-instruct-shrunk/build.py. Deterministic: rebuilding gives the
same files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from build_tokenizer import CORPUS, VOCAB_SIZE  # noqa: E402

# Qwen2-Audio's special tokens and their ids in the real tokenizer.
SPECIAL = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|AUDIO|>": 151646,
    "<|audio_bos|>": 151647,
    "<|audio_eos|>": 151648,
}
EXTRA = {"extra_special_tokens": {"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>",
                                  "audio_eos_token": "<|audio_eos|>"}}


def build(model_dir: Path, special: dict[str, int], extra: dict) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 20, trainer=trainer)
    # Give the special tokens their real ids: put them in the BPE vocab at those ids and list
    # them as added tokens, so they are never split and decode to themselves.
    data = json.loads(tok.to_str())
    for text, idx in special.items():
        data["model"]["vocab"][text] = idx
    data["added_tokens"] = [
        {"id": idx, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for text, idx in special.items()
    ]
    tok = Tokenizer.from_str(json.dumps(data))
    for text, idx in special.items():
        assert tok.encode(text).ids == [idx], text
    tok.save(str(model_dir / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "bos_token": None,
        "model_max_length": 32768,
        "clean_up_tokenization_spaces": False,
        **extra,
    }
    (model_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    limit = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    assert max(tok.get_vocab().values()) < limit, "tokenizer ids must stay below the model's vocab_size"
    print(f"wrote {model_dir}/tokenizer.json ({len(tok.get_vocab())} ids, model vocab {limit})")


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE, SPECIAL, EXTRA)
