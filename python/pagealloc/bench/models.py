"""Three hybrid models' KV-cache layouts, from their published configs.

Per-layer KV bytes per token = 2 (K and V) x num_key_value_heads x head_dim x
2 (bf16). A *group* is the set of layers of one kind; its bytes per token are
layers x that. The waste figures vLLM's RFC #11382 ("Hybrid Memory
Allocator") gives for one block size per token for all layers are 79.6%
(mllama), 25% (Gemma-2) and 56.25% (Ministral); the last two are the
sliding-window share of layers times the share of a full-length context
outside the window (1/2 x 1/2 and 3/4 x 3/4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

BF16 = 2


def per_layer_token_bytes(kv_heads: int, head_dim: int) -> int:
    return 2 * kv_heads * head_dim * BF16


@dataclass(frozen=True)
class Group:
    name: str
    kind: str
    """"full", "sliding" or "cross" (the pool's kinds)."""
    layers: int
    layer_token_bytes: int
    window: Optional[int] = None
    """Tokens a sliding-window layer attends to."""

    @property
    def token_bytes(self) -> int:
        return self.layers * self.layer_token_bytes


@dataclass(frozen=True)
class Model:
    name: str
    groups: List[Group]
    context: int
    memory_gib: int
    """KV memory given to every strategy (one GPU's share after weights)."""
    source: str
    encoder_tokens: int = 0
    """Cross-attention tokens per image (mllama's vision encoder output)."""
    trace: dict = field(default_factory=dict)

    def long_trace(self, shared: bool = True) -> dict:
        """The long-context trace: the default's shape, with every prompt
        in the last 1/16 of the model's context and outputs that run to
        its end. ``shared=False``: no request shares a prefix, the setting
        of the RFC's figures for sliding-window waste (Gemma-2's 25%,
        Ministral's 56.25%: every request at the full context, on its own)."""
        lo = self.context - self.context // 16
        t = dict(self.trace, prompt=(lo, self.context - 64), output=(self.context // 64, self.context // 16))
        if not shared:
            t["prefix_share"] = 0.0
        return t


# meta-llama/Llama-3.2-11B-Vision-Instruct config.json: text_config
# num_hidden_layers 40 with cross_attention_layers [3, 8, 13, 18, 23, 28, 33,
# 38] (8 cross, 32 self), num_key_value_heads 8, hidden_size 4096 /
# num_attention_heads 32 = head_dim 128; vision_config image_size 560,
# patch_size 14, max_num_tiles 4: (560/14)^2 + 1 = 1601 tokens a tile, 6404 an image.
MLLAMA = Model(
    name="mllama-11B",
    groups=[
        Group("self-attn", "full", 32, per_layer_token_bytes(8, 128)),
        Group("cross-attn", "cross", 8, per_layer_token_bytes(8, 128)),
    ],
    context=8192,
    memory_gib=24,
    encoder_tokens=4 * 1601,
    source="meta-llama/Llama-3.2-11B-Vision-Instruct config.json; vLLM RFC #11382 gives 79.6% waste",
    trace=dict(prompt=(200, 2500), output=(64, 512), image_share=0.9, prefix_share=0.5),
)

# google/gemma-2-9b config.json: num_hidden_layers 42, alternating local
# (sliding_window 4096) and global layers (21 each), num_key_value_heads 8,
# head_dim 256, max_position_embeddings 8192.
GEMMA2 = Model(
    name="gemma-2-9B",
    groups=[
        Group("global", "full", 21, per_layer_token_bytes(8, 256)),
        Group("local", "sliding", 21, per_layer_token_bytes(8, 256), window=4096),
    ],
    context=8192,
    memory_gib=40,
    source="google/gemma-2-9b config.json; vLLM RFC #11382 gives 25% waste",
    trace=dict(prompt=(6500, 8000), output=(32, 192), prefix_share=0.5),
)

# mistralai/Ministral-8B-Instruct-2410 config.json: num_hidden_layers 36,
# num_key_value_heads 8, head_dim 128, sliding_window 32768; its model card:
# a 128k context with interleaved sliding-window attention. vLLM serves it
# with 3 of every 4 layers sliding (27 sliding, 9 full), the pattern behind
# the RFC's 3/4 x 3/4 = 56.25%.
MINISTRAL = Model(
    name="ministral-8B",
    groups=[
        Group("full", "full", 9, per_layer_token_bytes(8, 128)),
        Group("sliding", "sliding", 27, per_layer_token_bytes(8, 128), window=32768),
    ],
    context=131072,
    memory_gib=80,
    source="mistralai/Ministral-8B-Instruct-2410 config.json and model card; vLLM RFC #11382 gives 56.25% waste",
    trace=dict(prompt=(24000, 120000), output=(128, 1024), prefix_share=0.5),
)

MODELS = [MLLAMA, GEMMA2, MINISTRAL]
