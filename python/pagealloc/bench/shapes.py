"""Hybrid models' KV-cache shapes, from ``transformers``' config classes.

``pip install transformers`` brings the config classes without torch or
weights; a class's defaults describe its reference checkpoint (named in its
``auto_docstring``). Where the model measured differs from that checkpoint,
the fields that differ are given here with their source.

Per-layer sizes follow vLLM 0.33's spec classes (``vllm/v1/kv_cache_interface.py``):
attention ``2 * num_kv_heads * head_dim * dtype`` bytes a token
(``AttentionSpec.page_size_bytes``), MLA ``(kv_lora_rank + rope_dim) *
dtype`` (one latent, no V), and a state layer the sum of its state tensors
(``MambaSpec.page_size_bytes``) with shapes from
``vllm/model_executor/layers/mamba/mamba_utils.py``
(``MambaStateShapeCalculator``: ``gated_delta_net_state_shape``,
``kda_state_shape``, ``mamba1_state_shape``), at tensor parallelism 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

BF16, FP32 = 2, 4


@dataclass(frozen=True)
class Layer:
    kind: str
    """"full", "sliding", "cross" (attention, bytes a token), "state" (a
    recurrent state, bytes a request), "indexer" (a sparse-attention key
    cache, bytes per ``tokens_per_state`` tokens)."""
    token_bytes: int = 0
    state_bytes: int = 0
    window: Optional[int] = None
    tokens_per_state: int = 1
    mla: bool = False


@dataclass(frozen=True)
class Shape:
    name: str
    layers: Dict[Layer, int]
    """Each distinct layer spec and how many layers have it."""
    source: str
    context: int
    memory_gib: float
    """KV memory given to every strategy."""
    encoder_tokens: int = 0
    """Cross-attention tokens per image."""
    num_spec: int = 0
    """Speculative (MTP) tokens: state layers keep that many more copies."""
    trace: dict = field(default_factory=dict)

    @property
    def hybrid(self) -> bool:
        return any(ly.kind == "state" for ly in self.layers)

    def attention(self) -> Layer:
        """The layer vLLM aligns state pages to (its first non-state spec)."""
        return next(ly for ly in self.layers if ly.kind in ("full", "sliding", "cross"))


def _transformers():
    import transformers  # noqa: F401  (the classes below import lazily)

    return transformers


def _gdn_state(c, num_spec: int = 0, ssm_bytes: int = FP32) -> int:
    """``gated_delta_net_state_shape``: conv (k*nk*2 + v*nv, kernel-1+spec) at
    the model dtype, temporal (nv, v, k) at the ssm dtype."""
    conv_dim = c.linear_key_head_dim * c.linear_num_key_heads * 2 + c.linear_value_head_dim * c.linear_num_value_heads
    conv = conv_dim * (c.linear_conv_kernel_dim - 1 + num_spec) * BF16
    temporal = c.linear_num_value_heads * c.linear_value_head_dim * c.linear_key_head_dim * ssm_bytes
    return conv + temporal


def qwen3_5_4b() -> Shape:
    """Qwen3.5-4B. ``Qwen3_5TextConfig``'s reference is Qwen3.5-27B; the
    4B's published config keeps its attention (4 KV heads of 256) and GDN
    shapes (16 key and 32 value heads of 128, kernel 4), 32 layers with full
    attention every 4th, and sets ``mamba_ssm_dtype: float32``, which vLLM
    reads (``Qwen3_5ForConditionalGenerationConfig`` in
    ``vllm/model_executor/models/config.py``). These give vLLM's logged
    528-token block (vllm-project/vllm#40696); the test suite checks it."""
    c = _transformers().Qwen3_5TextConfig(num_hidden_layers=32, hidden_size=2560)
    kinds = c.layer_types
    attn = Layer("full", token_bytes=2 * c.num_key_value_heads * c.head_dim * BF16)
    state = Layer("state", state_bytes=_gdn_state(c))
    return Shape("qwen3.5-4B", {attn: kinds.count("full_attention"), state: kinds.count("linear_attention")},
                 "transformers Qwen3_5TextConfig (32 layers); Qwen/Qwen3.5-4B config.json", 32768, 4,
                 trace=dict(prompt=(490, 520), prefix=480, output=(16, 64), prefix_share=1.0, families=4))


def qwen3_next() -> Shape:
    """Qwen3-Next-80B-A3B: ``Qwen3NextConfig``'s defaults (its reference)."""
    c = _transformers().Qwen3NextConfig()
    layer_types = getattr(c, "layer_types", None) or [
        "full_attention" if (i + 1) % c.full_attention_interval == 0 else "linear_attention"
        for i in range(c.num_hidden_layers)]
    attn = Layer("full", token_bytes=2 * c.num_key_value_heads * c.head_dim * BF16)
    state = Layer("state", state_bytes=_gdn_state(c))
    return Shape("qwen3-next-80B", {attn: layer_types.count("full_attention"), state: layer_types.count("linear_attention")},
                 "transformers Qwen3NextConfig defaults (Qwen/Qwen3-Next-80B-A3B-Instruct)", 262144, 8,
                 trace=dict(prompt=(200, 4000), prefix=1000, output=(64, 512), prefix_share=0.5))


def jamba() -> Shape:
    """Jamba-v0.1 (``JambaConfig`` defaults): attention every 8th layer
    (offset 4), the rest Mamba-1 (``mamba1_state_shape``: conv
    (expand*hidden, d_conv-1) and ssm (expand*hidden, d_state), both bf16)."""
    c = _transformers().JambaConfig()
    n_attn = sum(1 for i in range(c.num_hidden_layers) if i % c.attn_layer_period == c.attn_layer_offset)
    inner = c.mamba_expand * c.hidden_size
    state = Layer("state", state_bytes=inner * (c.mamba_d_conv - 1) * BF16 + inner * c.mamba_d_state * BF16)
    attn = Layer("full", token_bytes=2 * c.num_key_value_heads * (c.hidden_size // c.num_attention_heads) * BF16)
    return Shape("jamba-v0.1", {attn: n_attn, state: c.num_hidden_layers - n_attn},
                 "transformers JambaConfig defaults (ai21labs/Jamba-v0.1)", 262144, 8,
                 trace=dict(prompt=(200, 4000), prefix=1000, output=(64, 512), prefix_share=0.5))


def glm5_3_flash(num_spec: int = 3) -> Shape:
    """GLM-5.3-Flash (``Glm5NextTextConfig`` defaults, its reference): 11
    indexed-attention layers (MLA latent 512, no RoPE part, with an indexer
    key cache: 128-dim fp8 keys plus a 4-byte scale, one per ``index_kpool``
    = 16 tokens) and 34 KDA layers (``kda_state_shape``: conv (3*64*128,
    3+spec) bf16, recurrent (64, 128, 128) fp32). The MLA token is 576
    bytes (the 512 latent in fp8 plus its scales as vLLM's fp8 MLA cache
    packs them) and 3 MTP tokens: with these vLLM's alignment gives the
    7,808-token block of vllm-project/vllm#54458 (checked by the tests); the
    576 and the 3 are the deployment's, inferred from that figure."""
    c = _transformers().Glm5NextTextConfig()
    n_idx = c.layer_types.count("indexed_attention")
    n_lin = c.layer_types.count("linear_attention")
    conv_dim = 3 * c.linear_num_heads * c.linear_head_dim
    kda = conv_dim * (c.linear_conv_kernel_dim - 1 + num_spec) * BF16 + c.linear_num_heads * c.linear_head_dim ** 2 * FP32
    mla = Layer("full", token_bytes=576, mla=True)
    idx = Layer("indexer", token_bytes=c.index_head_dim + 4, tokens_per_state=c.index_kpool, mla=True)
    return Shape("glm-5.3-flash", {mla: n_idx, idx: n_idx, Layer("state", state_bytes=kda): n_lin},
                 "transformers Glm5NextTextConfig defaults (zai-org/GLM-5.3-Flash)", 1048576, 24, num_spec=num_spec,
                 trace=dict(prompt=(12, 2048), prefix=0, output=(16, 256), prefix_share=0.0))


def gemma3() -> Shape:
    """Gemma-3 (``Gemma3TextConfig`` defaults: gemma-3-4b): 5 sliding
    (window 1024) to 1 global layer."""
    c = _transformers().Gemma3TextConfig()
    tb = 2 * c.num_key_value_heads * c.head_dim * BF16
    kinds = c.layer_types
    return Shape("gemma-3-4B", {Layer("full", tb): kinds.count("full_attention"),
                                Layer("sliding", tb, window=c.sliding_window): kinds.count("sliding_attention")},
                 "transformers Gemma3TextConfig defaults (google/gemma-3-4b-it)", 131072, 8,
                 trace=dict(prompt=(2000, 16000), prefix=1500, output=(64, 512), prefix_share=0.5))


def gemma2() -> Shape:
    """Gemma-2-9B (``Gemma2Config`` defaults): alternating sliding (4096) and global."""
    c = _transformers().Gemma2Config()
    tb = 2 * c.num_key_value_heads * c.head_dim * BF16
    kinds = getattr(c, "layer_types", None) or ["sliding_attention" if i % 2 == 0 else "full_attention"
                                                  for i in range(c.num_hidden_layers)]
    return Shape("gemma-2-9B", {Layer("full", tb): kinds.count("full_attention"),
                                Layer("sliding", tb, window=c.sliding_window): kinds.count("sliding_attention")},
                 "transformers Gemma2Config defaults (google/gemma-2-9b)", 8192, 16,
                 trace=dict(prompt=(6500, 8000), prefix=3000, output=(32, 192), prefix_share=0.5))


def llama32_vision() -> Shape:
    """Llama-3.2-11B-Vision (``MllamaTextConfig`` defaults): 8 of 40 layers
    cross-attend to the image's 4 tiles x 1601 tokens (``MllamaVisionConfig``:
    (560/14)^2 + 1 a tile)."""
    t = _transformers()
    c, v = t.MllamaTextConfig(), t.MllamaVisionConfig()
    tb = 2 * c.num_key_value_heads * (c.hidden_size // c.num_attention_heads) * BF16
    n_cross = len(c.cross_attention_layers)
    tile = (v.image_size // v.patch_size) ** 2 + 1
    return Shape("llama-3.2-11B-vision", {Layer("full", tb): c.num_hidden_layers - n_cross, Layer("cross", tb): n_cross},
                 "transformers MllamaTextConfig/MllamaVisionConfig defaults (meta-llama/Llama-3.2-11B-Vision)",
                 8192, 8, encoder_tokens=v.max_num_tiles * tile,
                 trace=dict(prompt=(200, 2500), prefix=150, output=(64, 512), prefix_share=0.5, image_share=0.9))


SHAPES = [qwen3_5_4b, qwen3_next, jamba, glm5_3_flash, gemma3, gemma2, llama32_vision]


def all_shapes() -> List[Shape]:
    return [f() for f in SHAPES]
