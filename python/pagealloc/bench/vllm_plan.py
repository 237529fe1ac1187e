"""vLLM 0.33's KV-cache plan for a model shape, computed as its code does.

Each step names the function of the vLLM 0.33.0 wheel it follows
(rewritten here, not copied; the wheel's code is read, and vLLM's block
pool itself is loaded unchanged by :mod:`pagealloc.bench.vllm_ref`):

1. Block size: ``CacheConfig.DEFAULT_BLOCK_SIZE`` = 16. For a hybrid
   model ``Platform._align_hybrid_block_size``
   (``vllm/platforms/interface.py``) raises it so that one attention page
   (block size x the attention layer's bytes a token) is at least one
   state page: ``attn_block = align * cdiv(state_page, align * attn_token)``
   with ``align`` the backend's smallest kernel block (16 for FlashAttention;
   at least 128 for MLA), and then pads the state page up to the attention
   page (``mamba_page_size_padded``). In ``align`` mode (prefix caching on,
   ``MambaModelConfig.verify_and_update_config`` in
   ``vllm/model_executor/models/config.py``) the state block size is the
   attention block size: states are checkpointed at block boundaries.
2. Page sizes: ``unify_kv_cache_spec_page_size``
   (``vllm/v1/core/kv_cache_planning.py``): a smaller attention page whose
   size divides the largest gets a proportionally larger block size.
3. Groups: ``_get_kv_cache_groups_uniform_page_size`` (same file): layers
   with the same spec form a bucket; every group holds ``group_size``
   layers, the smallest bucket's size (or the largest's when that is less
   than 1.5 times it), padded; bucket ``i``'s layers ``[j::n]`` form its
   ``j``-th group.
4. Memory: every group's block ids come from one ``BlockPool``, and one id
   costs, per layer slot of a group, one page (``_get_kv_cache_bytes_per_block``:
   the largest group's sum of per-layer pages), so ``num_blocks = memory //
   (page * group_size)``.
5. GLM's indexer key cache shares the block of its co-located MLA layer
   (``Glm5NextIndexerCache``'s docstring, ``vllm/models/glm5next/common/attention.py``):
   it rides on the MLA group's ids and adds its page to their cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

from .shapes import Layer, Shape

DEFAULT_BLOCK_SIZE = 16
"""``CacheConfig.DEFAULT_BLOCK_SIZE``."""
FLASH_ATTN_KERNEL_BLOCK = 16
"""FlashAttention's smallest supported kernel block (``MultipleOf(16)``)."""
MLA_ALIGN = 128
"""``_align_hybrid_block_size``: hybrid MLA/Mamba models align to 128."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def attn_token_bytes(shape: Shape) -> int:
    """The attention page of one token that state pages align to (the
    model's attention spec at block size 1)."""
    return shape.attention().token_bytes


def state_page(shape: Shape) -> int:
    return max((ly.state_bytes for ly in shape.layers if ly.kind == "state"), default=0)


def block_size(shape: Shape, prefix_caching: bool = True) -> int:
    """The attention block size vLLM picks (``_align_hybrid_block_size``)."""
    bs = DEFAULT_BLOCK_SIZE
    if not shape.hybrid:
        return bs
    mla = any(ly.mla for ly in shape.layers)
    align = max(FLASH_ATTN_KERNEL_BLOCK, bs)
    if mla:
        align = max(align, MLA_ALIGN)
    need = align * cdiv(state_page(shape), align * attn_token_bytes(shape))
    return max(bs, need)


@dataclass
class Group:
    layer: Layer
    layers: int
    """Real layers in the group (the rest of ``group_size`` is padding)."""
    block_tokens: int
    page: int
    """Bytes of one block of one layer of the group."""
    rider_page: int = 0
    """Bytes an indexer riding on this group adds per block per layer."""


@dataclass
class Plan:
    shape: Shape
    block_tokens: int
    groups: List[Group]
    group_size: int
    page: int
    bytes_per_block: int
    num_blocks: int

    def describe(self) -> str:
        kinds: Dict[str, int] = {}
        for g in self.groups:
            kinds[g.layer.kind] = kinds.get(g.layer.kind, 0) + 1
        return (f"{self.shape.name}: block {self.block_tokens} tokens, {len(self.groups)} groups {kinds} "
                f"of {self.group_size} layer slots, page {self.page} B, {self.num_blocks} block ids")


def _layer_page(ly: Layer, bs: int, state_padded: int) -> int:
    if ly.kind == "state":
        return state_padded
    if ly.kind == "indexer":
        return cdiv(bs, ly.tokens_per_state) * ly.token_bytes
    return bs * ly.token_bytes


def plan(shape: Shape, memory_bytes: int, prefix_caching: bool = True) -> Plan:
    bs = block_size(shape, prefix_caching)
    padded = bs * attn_token_bytes(shape) if shape.hybrid else 0
    main = {ly: n for ly, n in shape.layers.items() if ly.kind != "indexer"}
    riders = {ly: n for ly, n in shape.layers.items() if ly.kind == "indexer"}
    # unify_kv_cache_spec_page_size: scale block sizes up to the largest page.
    pages = {ly: _layer_page(ly, bs, padded) for ly in main}
    top = max(pages.values())
    tokens = {}
    for ly, pg in pages.items():
        if ly.kind != "state" and top % pg == 0:
            tokens[ly] = bs * (top // pg)
            pages[ly] = top
        elif ly.kind == "state":
            tokens[ly] = bs
            pages[ly] = top
        else:
            raise NotImplementedError(f"{shape.name}: page {pg} does not divide {top}")
    # _get_kv_cache_groups_uniform_page_size
    counts = list(main.values())
    group_size = min(counts)
    if max(counts) < group_size * 1.5:
        group_size = max(counts)
    groups: List[Group] = []
    for ly, n in main.items():
        num = cdiv(n, group_size)
        for j in range(num):
            real = len(range(j, n, num))
            groups.append(Group(ly, real, tokens[ly], pages[ly]))
    for rider, n in riders.items():
        host = next(g for g in groups if g.layer.mla and g.layer.kind == "full")
        host.rider_page = _layer_page(rider, host.block_tokens, 0)
    per_block = max(group_size * (g.page + g.rider_page) for g in groups)
    return Plan(shape, bs, groups, group_size, top, per_block, memory_bytes // per_block)
