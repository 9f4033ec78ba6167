"""A LoRA adapter for the random test model, made here: random weights in safetensors and a PEFT
``adapter_config.json``, written with the standard library alone (the safetensors format is an
8-byte header length, a JSON header and the raw tensors), so no download and no torch."""

from __future__ import annotations

import json
import random
import struct
import sys
from array import array
from pathlib import Path

TARGETS = ("q_proj", "v_proj")


def _shapes(config: dict[str, object], rank: int) -> dict[str, tuple[int, int]]:
    """Each LoRA tensor's name and shape for the model's attention projections."""
    hidden = int(str(config["hidden_size"]))
    heads = int(str(config["num_attention_heads"]))
    kv_heads = int(str(config.get("num_key_value_heads", heads)))
    layers = int(str(config["num_hidden_layers"]))
    head_dim = hidden // heads
    out = {"q_proj": hidden, "v_proj": kv_heads * head_dim}
    shapes: dict[str, tuple[int, int]] = {}
    for layer in range(layers):
        for module in TARGETS:
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            shapes[f"{prefix}.lora_A.weight"] = (rank, hidden)
            shapes[f"{prefix}.lora_B.weight"] = (out[module], rank)
    return shapes


def write_lora_adapter(model_dir: Path, out: Path, *, rank: int = 8, seed: int = 0) -> Path:
    """A rank-``rank`` LoRA of the model in ``model_dir`` on q_proj and v_proj, in ``out``."""
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    rng = random.Random(seed)
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs: list[bytes] = []
    offset = 0
    for name, (rows, cols) in sorted(_shapes(config, rank).items()):
        values = array("f", (rng.gauss(0.0, 0.02) for _ in range(rows * cols)))
        if sys.byteorder == "big":  # safetensors is little-endian
            values.byteswap()
        data = values.tobytes()
        header[name] = {"dtype": "F32", "shape": [rows, cols],
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the header is padded to 8 bytes
    out.mkdir(parents=True, exist_ok=True)
    (out / "adapter_model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text
                                                    + b"".join(blobs))
    (out / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank,
        "lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": False,
        "target_modules": list(TARGETS), "base_model_name_or_path": str(model_dir),
        "modules_to_save": None, "use_rslora": False, "use_dora": False}, indent=2),
        encoding="utf-8")
    return out
