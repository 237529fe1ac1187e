/*
 * pagealloc: the order-0 fast path inlined into C callers (hand-written; the
 * structures and constants it uses are generated into pagealloc.h, and their
 * layouts are asserted against the library's at its compile time).
 *
 *   pagealloc_tcache *tc;
 *   pagealloc_tcache_create(a, &tc);             // once per thread
 *   uint64_t pfn;
 *   pagealloc_tc_alloc_page(tc, PAGEALLOC_GFP_KERNEL, &pfn);
 *   pagealloc_tc_free_page(tc, pfn);
 *   pagealloc_tcache_destroy(tc);                // before the thread exits
 *
 * pagealloc_tc_alloc_page(tc, gfp, out) is pagealloc_alloc_pages(a, gfp, 0,
 * out), and pagealloc_tc_free_page(tc, pfn) is pagealloc_free_pages(a, pfn, 0):
 * the same results, errors and last-error messages. A page in the calling
 * thread's front cache is taken or put back right here, with no call: the
 * owner's side of the front cache's handshake (two stores and a load of the
 * thread's own slot, a compiler fence; the drainer's membarrier supplies the
 * rest), the descriptor's flags word (a release store on allocation; on free a
 * compare-and-swap from exactly HEAD, the one atomic read-modify-write of the
 * pair, then the order word read again). Everything else is the library call.
 *
 * Thread safety: a tcache belongs to the thread that made it. A call from any
 * other thread is still correct (it takes the library call). Not
 * async-signal-safe, as the library calls they fall back to are not (from a
 * signal handler use pagealloc_alloc_pages_nolock); a handler interrupting an
 * inline call finds the slot busy and takes the library call, so the slot
 * itself is never entered twice. Requires GCC or Clang (__atomic builtins);
 * the inline hit exists on x86-64 (elsewhere every call is the library call).
 */
#ifndef PAGEALLOC_INLINE_H
#define PAGEALLOC_INLINE_H

#include "pagealloc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The inline calls below read the thread cache's words in the layout of the
 * pagealloc.h they were compiled with. That layout is an ABI, versioned by
 * PAGEALLOC_INLINE_ABI_VERSION: with this header, making a thread cache passes
 * the version to the library, which refuses another than its own with
 * PAGEALLOC_ERR_ABI_MISMATCH (and *out NULL), so a program built against other
 * headers than its library's takes no inline path over a foreign layout. */
#define pagealloc_tcache_create(a, out) \
    pagealloc_tcache_create_abi((a), PAGEALLOC_INLINE_ABI_VERSION, (out))

/* Unoptimized builds (no -O) take the library calls: there the inline path,
 * its helpers not inlined, costs several times a call into the optimized
 * library (50 ns a pair at -O0 against 9 through the calls, 2026-11-24). */
#if defined(__OPTIMIZE__)
#define PAGEALLOC__TC_INLINE 1
#else
#define PAGEALLOC__TC_INLINE 0
#endif

/* The thread pointer the library recorded in the tcache (x86-64: fs:0). On
 * other targets the tcache's keys never match, so this value is not used. */
static inline const void *pagealloc__thread_self(void) {
#if defined(__x86_64__) && defined(__has_builtin)
#if __has_builtin(__builtin_thread_pointer)
#define PAGEALLOC__HAVE_TP_BUILTIN 1
#endif
#endif
#if defined(PAGEALLOC__HAVE_TP_BUILTIN)
    return __builtin_thread_pointer(); /* the compiler knows it is constant */
#elif defined(__x86_64__)
    const void *tp;
    __asm__("mov %%fs:0, %0" : "=r"(tp));
    return tp;
#else
    return (const void *)0;
#endif
}

/* Enter the slot's operation: 1 when the stacks are ours until
 * pagealloc__tc_exit, 0 (nothing changed) when the slot is in another
 * operation (a handler interrupted one), held by a drainer, or not for this
 * path. */
static inline int pagealloc__tc_enter(pagealloc_front_slot *slot, uint64_t key) {
    if (__atomic_load_n(&slot->state, __ATOMIC_RELAXED) != key)
        return 0;
    __atomic_store_n(&slot->state, PAGEALLOC__BUSY, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&slot->drain_req, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&slot->state, key, __ATOMIC_RELEASE);
        return 0;
    }
    return 1;
}

static inline void pagealloc__tc_exit(pagealloc_front_slot *slot, uint64_t key) {
    __atomic_store_n(&slot->state, key, __ATOMIC_RELEASE);
}

/* The owner's event counter: a load and a store (it is the only writer). */
static inline void pagealloc__tc_count(pagealloc_front_slot *slot, uint32_t ev) {
    uint64_t *c = &slot->events[ev];
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* The stack of a request's type: Movable (MOVABLE set), Reclaimable
 * (RECLAIMABLE alone) or Unmovable, as the library's Gfp::migratetype (the
 * library asserts these indexes); a constant when the flags are. */
static inline uint32_t pagealloc__tc_stack_of(uint32_t gfp_flags) {
    return (gfp_flags & PAGEALLOC_GFP_MOVABLE) ? PAGEALLOC__STACK_MOVABLE
         : (gfp_flags & PAGEALLOC_GFP_RECLAIMABLE) ? PAGEALLOC__STACK_RECLAIMABLE
                                                   : PAGEALLOC__STACK_UNMOVABLE;
}

/* The inline hit of an order-0 allocation: 1 and the pfn in *pfn_out, or 0
 * (nothing changed) where the library call must serve it. Every field is
 * read before the handshake's compiler fence, which would force a reload. */
static inline int pagealloc__tc_alloc_hit(const pagealloc_tcache *tc, uint32_t gfp_flags, uint64_t *pfn_out) {
    if (!PAGEALLOC__TC_INLINE || !tc || tc->thread != pagealloc__thread_self() ||
        (gfp_flags & ~PAGEALLOC__INLINE_GFP))
        return 0;
    pagealloc_front_slot *slot = tc->slot;
    pagealloc_page_desc *descs = tc->descs;
    size_t prefetch = tc->prefetch_base;
    uint64_t key = tc->alloc_key;
    if (!pagealloc__tc_enter(slot, key))
        return 0;
    pagealloc_front_stack *s = &slot->stacks[pagealloc__tc_stack_of(gfp_flags)];
    uint32_t len = s->len;
    if (len == 0) {
        pagealloc__tc_exit(slot, key);
        return 0;
    }
    uint32_t p = s->pfns[--len];
    s->len = len;
    if (prefetch) /* the frame four allocations ahead, for writing */
        __builtin_prefetch((const char *)prefetch + (size_t)s->pfns[(len - 4u) % PAGEALLOC__STACK_CAP] * PAGEALLOC__PAGE_SIZE, 1);
    __atomic_store_n(&descs[p].flags, PAGEALLOC__FLAG_HEAD, __ATOMIC_RELEASE);
    pagealloc__tc_count(slot, s->alloc_ev);
    pagealloc__tc_exit(slot, key);
    *pfn_out = p;
    return 1;
}

/* pagealloc_alloc_pages(tc's allocator, gfp_flags, 0, pfn_out). */
static inline pagealloc_status pagealloc_tc_alloc_page(const pagealloc_tcache *tc, uint32_t gfp_flags,
                                                       uint64_t *pfn_out) {
    if (pfn_out && pagealloc__tc_alloc_hit(tc, gfp_flags, pfn_out))
        return PAGEALLOC_OK;
    return pagealloc_alloc_pages(tc ? tc->handle : (const pagealloc *)0, gfp_flags, 0, pfn_out);
}

/* The same as a value: the pfn, or PAGEALLOC_HOLE when the allocation failed
 * (the calling thread's last error says why). */
static inline uint64_t pagealloc_tc_alloc(const pagealloc_tcache *tc, uint32_t gfp_flags) {
    uint64_t pfn;
    if (pagealloc__tc_alloc_hit(tc, gfp_flags, &pfn))
        return pfn;
    return pagealloc_tc_alloc_slow(tc ? tc->handle : (const pagealloc *)0, gfp_flags);
}

/* pagealloc_page_address(tc's allocator, pfn, &addr)'s address, or NULL
 * where that call fails (no backing memory, a pfn out of range: the calling
 * thread's last error says why). Any thread may call it. */
static inline void *pagealloc_tc_page_address(const pagealloc_tcache *tc, uint64_t pfn) {
    void *addr = (void *)0;
    if (tc && tc->arena_base && pfn < tc->nr_pages)
        return (char *)tc->arena_base + (size_t)pfn * PAGEALLOC__PAGE_SIZE;
    if (pagealloc_page_address(tc ? tc->handle : (const pagealloc *)0, pfn, &addr) != PAGEALLOC_OK)
        return (void *)0;
    return addr;
}

/* pagealloc_free_pages(tc's allocator, pfn, 0). */
static inline pagealloc_status pagealloc_tc_free_page(const pagealloc_tcache *tc, uint64_t pfn) {
    if (PAGEALLOC__TC_INLINE && tc && tc->thread == pagealloc__thread_self() && pfn < tc->nr_pages) {
        pagealloc_front_slot *slot = tc->slot;
        uint64_t key = tc->free_key;
        pagealloc_page_desc *d = &tc->descs[pfn];
        /* An order-0 page's order word is its stack's index. */
        uint32_t t = __atomic_load_n(&d->private_word, __ATOMIC_RELAXED);
        uint16_t w = __atomic_load_n(&tc->blocks[pfn >> PAGEALLOC__PAGEBLOCK_ORDER], __ATOMIC_RELAXED);
        uint32_t expected = PAGEALLOC__FLAG_HEAD;
        if (t < PAGEALLOC__STACKS &&
            __atomic_compare_exchange_n(&d->flags, &expected, PAGEALLOC__FLAG_PCP, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            /* Ours now. Freed and handed out again at another order since
             * its word was read? Then the library frees it as it is. */
            if (__atomic_load_n(&d->private_word, __ATOMIC_RELAXED) == t && pagealloc__tc_enter(slot, key)) {
                pagealloc_front_stack *s = &slot->stacks[t];
                uint32_t len = s->len;
                if (s->key == (uint16_t)(w & PAGEALLOC__PB_KEY_MASK) && len < PAGEALLOC__STACK_CAP) {
                    s->pfns[len] = (uint32_t)pfn;
                    s->len = len + 1;
                    pagealloc__tc_count(slot, PAGEALLOC__EV_PGFREE);
                    pagealloc__tc_exit(slot, key);
                    return PAGEALLOC_OK;
                }
                pagealloc__tc_exit(slot, key);
            }
            return pagealloc__tc_free_claimed(tc->handle, pfn);
        }
    }
    return pagealloc_free_pages(tc ? tc->handle : (const pagealloc *)0, pfn, 0);
}

#ifdef __cplusplus
}
#endif

#endif /* PAGEALLOC_INLINE_H */
