/*
 * The C API from C: normal use and bad inputs. Every bad input must come back
 * as its own status code (with a message naming the pfn), and nothing may
 * crash. Built and run by tests/c_api.rs (statically and against the shared
 * library); exits 0 when every check passes.
 */
/* sigaction, setitimer and clock_gettime under -std=c11. */
#define _GNU_SOURCE
#include "pagealloc.h"
#include "check.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char msg[512];

static const char *last_msg(void) {
    pagealloc_last_error_message(msg, sizeof msg);
    return msg;
}

/* The last error is `code` and its message contains `needle`. */
static void expect_last(int line, pagealloc_status code, const char *needle) {
    checks++;
    if (pagealloc_last_error() != code || strstr(last_msg(), needle) == NULL) {
        failures++;
        fprintf(stderr, "api_test.c:%d: last error %s \"%s\", want %s containing \"%s\"\n", line,
                pagealloc_status_name(pagealloc_last_error()), msg, pagealloc_status_name(code), needle);
    }
}
#define EXPECT_LAST(code, needle) expect_last(__LINE__, code, needle)

static void config_and_lifecycle(void) {
    pagealloc_config cfg;
    pagealloc *a = (pagealloc *)0x1;

    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_config_default(NULL));
    EXPECT(PAGEALLOC_OK, pagealloc_config_default(&cfg));
    CHECK(cfg.arena_bytes == (uint64_t)1 << 30);
    CHECK(cfg.nodes == 1 && cfg.pcp_lists && cfg.front_cache && cfg.page_lock_waiters_bit);
    CHECK(cfg.backing == PAGEALLOC_BACKING_ANONYMOUS && cfg.min_free_kbytes == 0 && cfg.nr_cpus == 0);

    /* Bad configurations: a code, the field in the message, a NULL handle. */
    cfg.arena_bytes = 1 << 20;
    EXPECT(PAGEALLOC_ERR_INVALID_CONFIG, pagealloc_create(&cfg, &a));
    CHECK(a == NULL);
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_CONFIG, "smaller than one pageblock");
    cfg.arena_bytes = (16 << 20) + 1;
    EXPECT(PAGEALLOC_ERR_INVALID_CONFIG, pagealloc_create(&cfg, &a));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_CONFIG, "multiple of the page size");
    cfg.arena_bytes = 16 << 20;
    cfg.nodes = 0;
    EXPECT(PAGEALLOC_ERR_INVALID_CONFIG, pagealloc_create(&cfg, &a));
    cfg.nodes = 1;
    cfg.watermark_scale_factor = 0;
    EXPECT(PAGEALLOC_ERR_INVALID_CONFIG, pagealloc_create(&cfg, &a));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_CONFIG, "watermark_scale_factor");
    cfg.watermark_scale_factor = 10;
    cfg.backing = 42;
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_create(&cfg, &a));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_ARGUMENT, "backing 42");
    cfg.backing = PAGEALLOC_BACKING_NONE;
    cfg.drain_mode = 7;
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_create(&cfg, &a));
    cfg.drain_mode = PAGEALLOC_DRAIN_TWO_PASS;
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_create(&cfg, NULL));

    /* Each old-design switch flipped: accepted only by a library built with
       the seed-variants feature, refused with a message otherwise. */
    cfg.pcp_migratetype_cache = true;
    cfg.pagetypeinfo_walk_lists = true;
    cfg.page_lock_waiters_bit = false;
#ifndef PAGEALLOC_SEED_VARIANTS
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_create(&cfg, &a));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_ARGUMENT, "seed-variants");
    cfg.drain_mode = PAGEALLOC_DRAIN_BLOCKS;
    cfg.pcp_migratetype_cache = false;
    cfg.pagetypeinfo_walk_lists = false;
    cfg.page_lock_waiters_bit = true;
#endif

    /* A good one, then destroyed. */
    cfg.nr_cpus = 3;
    cfg.min_free_kbytes = 512;
    EXPECT(PAGEALLOC_OK, pagealloc_create(&cfg, &a));
    CHECK(a != NULL);
    CHECK(pagealloc_nr_pages(a) == 4096);
    CHECK(pagealloc_managed_pages(a) == 4096);
    uint64_t p;
    void *addr = (void *)0x1;
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages(a, PAGEALLOC_GFP_KERNEL, 0, &p));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_address(a, p, &addr));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_ARGUMENT, "no backing");
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, p, 0));
    EXPECT(PAGEALLOC_OK, pagealloc_check_invariants(a));
    EXPECT(PAGEALLOC_OK, pagealloc_destroy(a));

    /* NULL config: the defaults (a 1 GiB MAP_NORESERVE arena). */
    EXPECT(PAGEALLOC_OK, pagealloc_create(NULL, &a));
    CHECK(pagealloc_nr_pages(a) == 262144);
    EXPECT(PAGEALLOC_OK, pagealloc_destroy(a));

    /* Destroying NULL is a no-op; a pointer that is not a handle is refused. */
    EXPECT(PAGEALLOC_OK, pagealloc_destroy(NULL));
    uint64_t fake[16] = {0};
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_destroy((pagealloc *)fake));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_ARGUMENT, "not a pagealloc handle");
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_destroy((pagealloc *)((char *)fake + 1)));
}

/* Every entry point refuses a NULL handle and a fake one, aligned or not
 * (the order-0 inline paths read the tag unaligned), with a code. */
static void bad_handles(void) {
    uint64_t fake_mem[16] = {0};
    const pagealloc *handles[3] = {NULL, (const pagealloc *)fake_mem, (const pagealloc *)((char *)fake_mem + 1)};
    for (int i = 0; i < 3; i++) {
        const pagealloc *h = handles[i];
        uint64_t p = 0, slots[4] = {PAGEALLOC_HOLE, PAGEALLOC_HOLE, PAGEALLOC_HOLE, PAGEALLOC_HOLE};
        size_t n = 99;
        bool b = false;
        void *addr = NULL;
        char buf[16];
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_pages(h, 0, 0, &p));
        EXPECT_LAST(PAGEALLOC_ERR_INVALID_ARGUMENT, i == 0 ? "handle is NULL" : "not a pagealloc handle");
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_pages_node(h, 0, 0, 0, &p));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_free_pages(h, 0, 0));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_address(h, 0, &addr));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_pages_bulk(h, 0, slots, 4, &n));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_free_pages_bulk(h, slots, 4, &n, &n));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_free_pages_bulk_slots(h, slots, 4, &n, &n));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_isolate_range(h, 0, 512));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_undo_isolate_range(h, 0, 512));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_test_pages_isolated(h, 0, 512, &b));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_contig_pages(h, 4, 0, &p));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_free_contig_range(h, 0, 4));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_lock_page(h, 0));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_trylock_page(h, 0));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_lock_page_timeout(h, 0, 1000));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_unlock_page(h, 0));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_unlock_page_uptodate(h, 0));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_uptodate(h, 0, &b));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_set_page_writeback(h, 0, &b));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_end_page_writeback(h, 0));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_wait_on_page_writeback(h, 0));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_wait_on_page_writeback_timeout(h, 0, 1000));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_drain_local_pages(h));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_drain_all_pages(h));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_check_invariants(h));
        pagealloc_tcache *tc = NULL;
        pagealloc_page_array *arr = NULL;
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_pages_nolock(h, 0, 0, &p));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_free_pages_nolock(h, 0, 0));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_tcache_create(h, &tc));
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_array_create(h, 4, &arr));
        CHECK(tc == NULL && arr == NULL);
        CHECK(pagealloc_tc_alloc_slow(h, 0) == PAGEALLOC_HOLE);
        /* pagealloc_inline.h's internal free, which takes the handle too. */
        EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc__tc_free_claimed(h, 0));
        CHECK(pagealloc_nr_free_pages(h) == 0);
        CHECK(pagealloc_managed_pages(h) == 0);
        CHECK(pagealloc_nr_pages(h) == 0);
        EXPECT_LAST(PAGEALLOC_ERR_INVALID_ARGUMENT, "handle");
        CHECK(pagealloc_buddyinfo(h, buf, sizeof buf) == -PAGEALLOC_ERR_INVALID_ARGUMENT);
        CHECK(pagealloc_pagetypeinfo(h, buf, sizeof buf) == -PAGEALLOC_ERR_INVALID_ARGUMENT);
        CHECK(pagealloc_zoneinfo(h, buf, sizeof buf) == -PAGEALLOC_ERR_INVALID_ARGUMENT);
        CHECK(pagealloc_vmstat(h, buf, sizeof buf) == -PAGEALLOC_ERR_INVALID_ARGUMENT);
    }
}

static pagealloc *make(uint64_t bytes, uint32_t backing) {
    pagealloc_config cfg;
    pagealloc *a = NULL;
    pagealloc_config_default(&cfg);
    cfg.arena_bytes = bytes;
    cfg.backing = backing;
    cfg.nr_cpus = 4;
    if (pagealloc_create(&cfg, &a) != PAGEALLOC_OK) {
        fprintf(stderr, "pagealloc_create: %s\n", last_msg());
        exit(2);
    }
    return a;
}

static void alloc_free(pagealloc *a) {
    uint64_t p0, p2, q;
    void *addr = NULL;
    const uint64_t free_before = pagealloc_nr_free_pages(a);

    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages(a, PAGEALLOC_GFP_USER, 0, &p0));
    EXPECT(PAGEALLOC_OK, pagealloc_page_address(a, p0, &addr));
    CHECK(addr != NULL && ((uintptr_t)addr % PAGEALLOC_PAGE_SIZE) == 0);
    memset(addr, 0xab, PAGEALLOC_PAGE_SIZE);

    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages(a, PAGEALLOC_GFP_MOVABLE | PAGEALLOC_GFP_ZERO, 2, &p2));
    CHECK(p2 % 4 == 0);
    EXPECT(PAGEALLOC_OK, pagealloc_page_address(a, p2, &addr));
    int zero = 1;
    for (size_t i = 0; i < 4 * PAGEALLOC_PAGE_SIZE; i++)
        zero &= ((unsigned char *)addr)[i] == 0;
    CHECK(zero);
    memset(addr, 0x5a, 4 * PAGEALLOC_PAGE_SIZE);

    /* Bad frees: each its own code, the pfn in the message, nothing changed. */
    char want[64];
    EXPECT(PAGEALLOC_ERR_WRONG_ORDER, pagealloc_free_pages(a, p2, 1));
    snprintf(want, sizeof want, "pfn %#" PRIx64 " was allocated with order 2", p2);
    EXPECT_LAST(PAGEALLOC_ERR_WRONG_ORDER, want);
    EXPECT(PAGEALLOC_ERR_MISALIGNED, pagealloc_free_pages(a, p2 + 1, 1));
    EXPECT_LAST(PAGEALLOC_ERR_MISALIGNED, "not aligned for order 1");
    EXPECT(PAGEALLOC_ERR_INSIDE_BLOCK, pagealloc_free_pages(a, p2 + 1, 0));
    EXPECT_LAST(PAGEALLOC_ERR_INSIDE_BLOCK, "inside the allocated block");
    EXPECT(PAGEALLOC_ERR_INVALID_ORDER, pagealloc_free_pages(a, p2, 11));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_free_pages(a, pagealloc_nr_pages(a), 0));
    snprintf(want, sizeof want, "pfn %#" PRIx64 " is out of range", pagealloc_nr_pages(a));
    EXPECT_LAST(PAGEALLOC_ERR_OUT_OF_RANGE, want);
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_free_pages(a, PAGEALLOC_HOLE, 0));
    EXPECT_LAST(PAGEALLOC_ERR_OUT_OF_RANGE, "0xffffffffffffffff is out of range");
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_free_pages(a, UINT64_MAX - 1, 3));

    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, p2, 2));
    EXPECT(PAGEALLOC_ERR_DOUBLE_FREE, pagealloc_free_pages(a, p2, 2));
    snprintf(want, sizeof want, "pfn %#" PRIx64 " is already free (double free)", p2);
    EXPECT_LAST(PAGEALLOC_ERR_DOUBLE_FREE, want);
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, p0, 0));
    EXPECT(PAGEALLOC_ERR_DOUBLE_FREE, pagealloc_free_pages(a, p0, 0));

    /* Bad allocations. */
    q = 12345;
    EXPECT(PAGEALLOC_ERR_INVALID_ORDER, pagealloc_alloc_pages(a, 0, 11, &q));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_ORDER, "order 11 is above the maximum order 10");
    CHECK(q == 12345);
    EXPECT(PAGEALLOC_ERR_INVALID_ORDER, pagealloc_alloc_pages(a, 0, UINT32_MAX, &q));
    EXPECT(PAGEALLOC_ERR_INVALID_NODE, pagealloc_alloc_pages_node(a, 3, 0, 0, &q));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_NODE, "node 3 does not exist");
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_pages(a, 1u << 7, 0, &q));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_ARGUMENT, "unknown: 0x80");
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_pages(a, 0, 0, NULL));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_ARGUMENT, "pfn_out is NULL");
    /* Out parameters may be misaligned (written unaligned). */
    unsigned char odd[16];
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages(a, 0, 0, (uint64_t *)(void *)(odd + 1)));
    memcpy(&q, odd + 1, sizeof q);
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, q, 0));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_address(a, 0, NULL));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_page_address(a, pagealloc_nr_pages(a), &addr));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_page_address(a, PAGEALLOC_HOLE, &addr));

    /* Every order, then all of it back. */
    uint64_t blocks[PAGEALLOC_MAX_ORDER + 1];
    for (uint32_t o = 0; o <= PAGEALLOC_MAX_ORDER; o++)
        EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages(a, PAGEALLOC_GFP_KERNEL, o, &blocks[o]));
    for (uint32_t o = 0; o <= PAGEALLOC_MAX_ORDER; o++)
        EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, blocks[o], o));

    /* Until memory runs out: NO_MEMORY, not a crash. */
    uint64_t *many = malloc(sizeof(uint64_t) * 64);
    size_t got = 0;
    pagealloc_status s;
    while ((s = pagealloc_alloc_pages(a, PAGEALLOC_GFP_KERNEL, PAGEALLOC_MAX_ORDER, &many[got])) == PAGEALLOC_OK)
        got++;
    CHECK(s == PAGEALLOC_ERR_NO_MEMORY);
    EXPECT_LAST(PAGEALLOC_ERR_NO_MEMORY, "out of memory");
    CHECK(got > 0 && got < 64);
    for (size_t i = 0; i < got; i++)
        EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, many[i], PAGEALLOC_MAX_ORDER));
    free(many);

    EXPECT(PAGEALLOC_OK, pagealloc_drain_all_pages(a));
    EXPECT(PAGEALLOC_OK, pagealloc_check_invariants(a));
    CHECK(pagealloc_nr_free_pages(a) == free_before || free_before < pagealloc_nr_free_pages(a));
}

static void bulk(pagealloc *a) {
    enum { N = 1000 }; /* more than one of the API's internal chunks */
    uint64_t *slots = malloc(sizeof(uint64_t) * N);
    size_t n = 0, rej = 0, first = 0;

    for (size_t i = 0; i < N; i++)
        slots[i] = PAGEALLOC_HOLE;
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages_bulk(a, PAGEALLOC_GFP_MOVABLE, slots, N, &n));
    CHECK(n == N);
    int ok = 1;
    for (size_t i = 0; i < N; i++)
        ok &= slots[i] != PAGEALLOC_HOLE && slots[i] < pagealloc_nr_pages(a);
    CHECK(ok);

    /* Holes only are filled: punch three, refill, the others stay put. */
    uint64_t keep = slots[1];
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, slots[0], 0));
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, slots[500], 0));
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, slots[999], 0));
    slots[0] = slots[500] = slots[999] = PAGEALLOC_HOLE;
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages_bulk(a, PAGEALLOC_GFP_MOVABLE, slots, N, NULL));
    CHECK(slots[1] == keep && slots[0] != PAGEALLOC_HOLE && slots[500] != PAGEALLOC_HOLE &&
          slots[999] != PAGEALLOC_HOLE);

    /* Free them all through the slots form: every slot emptied. */
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages_bulk_slots(a, slots, N, &rej, &first));
    CHECK(rej == 0 && first == SIZE_MAX);
    ok = 1;
    for (size_t i = 0; i < N; i++)
        ok &= slots[i] == PAGEALLOC_HOLE;
    CHECK(ok);
    /* All holes: nothing to do. */
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages_bulk_slots(a, slots, N, &rej, &first));
    CHECK(rej == 0);

    /* The list form with bad entries: the good ones freed, the bad counted. */
    uint64_t list[6];
    for (int i = 0; i < 6; i++)
        EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages(a, 0, 0, &list[i]));
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, list[3], 0));
    uint64_t lost1 = list[1];
    list[1] = PAGEALLOC_HOLE;             /* not a pfn */
    uint64_t lost = list[4];
    list[4] = pagealloc_nr_pages(a) + 7;  /* out of range */
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_free_pages_bulk(a, list, 6, &rej, &first));
    CHECK(rej == 3 && first == 1);
    EXPECT_LAST(PAGEALLOC_ERR_OUT_OF_RANGE, "skipped 3 invalid entries (first: index 1: pfn 0xffffffffffffffff");
    EXPECT(PAGEALLOC_ERR_DOUBLE_FREE, pagealloc_free_pages(a, list[0], 0));
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, lost, 0));
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, lost1, 0));

    /* Slots form with a double free: the bad slot stays, the rest emptied. */
    uint64_t s2[4] = {PAGEALLOC_HOLE, PAGEALLOC_HOLE, PAGEALLOC_HOLE, PAGEALLOC_HOLE};
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages_bulk(a, 0, s2, 4, &n));
    CHECK(n == 4);
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, s2[2], 0));
    uint64_t stale = s2[2];
    EXPECT(PAGEALLOC_ERR_DOUBLE_FREE, pagealloc_free_pages_bulk_slots(a, s2, 4, &rej, NULL));
    CHECK(rej == 1);
    CHECK(s2[0] == PAGEALLOC_HOLE && s2[1] == PAGEALLOC_HOLE && s2[2] == stale && s2[3] == PAGEALLOC_HOLE);

    /* Empty arrays may be NULL; non-empty ones may not. */
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages_bulk(a, 0, NULL, 0, &n));
    CHECK(n == 0);
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages_bulk(a, NULL, 0, NULL, NULL));
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages_bulk_slots(a, NULL, 0, NULL, NULL));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_pages_bulk(a, 0, NULL, 4, &n));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_ARGUMENT, "slots is NULL");
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_free_pages_bulk(a, NULL, 4, NULL, NULL));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_free_pages_bulk_slots(a, NULL, 4, NULL, NULL));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_pages_bulk(a, 0xffff, slots, 4, &n));

    /* Asking for more than the arena: a short count, not an error. */
    size_t big = (size_t)pagealloc_nr_pages(a) + 100;
    uint64_t *all = malloc(sizeof(uint64_t) * big);
    for (size_t i = 0; i < big; i++)
        all[i] = PAGEALLOC_HOLE;
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages_bulk(a, 0, all, big, &n));
    CHECK(n > 0 && n < big && all[n] == PAGEALLOC_HOLE);
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages_bulk_slots(a, all, big, &rej, &first));
    CHECK(rej == 0);
    free(all);
    free(slots);
    EXPECT(PAGEALLOC_OK, pagealloc_drain_all_pages(a));
    EXPECT(PAGEALLOC_OK, pagealloc_check_invariants(a));
}

/* Page arrays: filled, refused to every pfn call while held, taken out as
 * raw pages, released; the handle refuses destruction while one lives. */
static void page_arrays(pagealloc *a) {
    enum { N = 100 };
    uint64_t free0, p, q;
    size_t n, len;
    EXPECT(PAGEALLOC_OK, pagealloc_drain_all_pages(a));
    free0 = pagealloc_nr_free_pages(a);
    pagealloc_page_array *arr = NULL;
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_array_create(a, N, NULL));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT,
           pagealloc_page_array_create(a, (size_t)pagealloc_nr_pages(a) + 1, &arr));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_ARGUMENT, "more than the arena");
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_array_create(NULL, N, &arr));
    EXPECT(PAGEALLOC_OK, pagealloc_page_array_create(a, N, &arr));
    CHECK(arr != NULL);
    EXPECT(PAGEALLOC_OK, pagealloc_page_array_len(arr, &len));
    CHECK(len == N);
    EXPECT(PAGEALLOC_OK, pagealloc_page_array_get(arr, 0, &p));
    CHECK(p == PAGEALLOC_HOLE);
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_array_fill(arr, 0x80000000u, &n));
    EXPECT(PAGEALLOC_OK, pagealloc_page_array_fill(arr, PAGEALLOC_GFP_ZERO, &n));
    CHECK(n == N);
    /* Held: every pfn call refuses the pages, and nothing changes. */
    uint64_t before = pagealloc_nr_free_pages(a);
    int ok = 1;
    for (size_t i = 0; i < N; i++) {
        EXPECT(PAGEALLOC_OK, pagealloc_page_array_get(arr, i, &p));
        ok &= p != PAGEALLOC_HOLE;
        ok &= pagealloc_free_pages(a, p, 0) == PAGEALLOC_ERR_NOT_ALLOCATED;
        ok &= pagealloc_lock_page(a, p) == PAGEALLOC_ERR_NOT_ALLOCATED;
        void *addr = NULL;
        ok &= pagealloc_page_address(a, p, &addr) == PAGEALLOC_OK && addr != NULL;
        if (addr) {
            ok &= ((unsigned char *)addr)[100] == 0; /* zeroed */
            ((unsigned char *)addr)[0] = (unsigned char)i;
        }
    }
    CHECK(ok);
    CHECK(pagealloc_nr_free_pages(a) == before);
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_array_get(arr, N, &p));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_array_get(arr, 0, NULL));
    /* The handle is busy while the array lives. */
    EXPECT(PAGEALLOC_ERR_BUSY, pagealloc_destroy(a));
    EXPECT_LAST(PAGEALLOC_ERR_BUSY, "page arrays");
    /* Slot 7 taken out: an ordinary page from then on. */
    EXPECT(PAGEALLOC_OK, pagealloc_page_array_take(arr, 7, &q));
    CHECK(q != PAGEALLOC_HOLE);
    EXPECT(PAGEALLOC_OK, pagealloc_page_array_take(arr, 7, &p));
    CHECK(p == PAGEALLOC_HOLE);
    EXPECT(PAGEALLOC_OK, pagealloc_lock_page(a, q));
    EXPECT(PAGEALLOC_OK, pagealloc_unlock_page(a, q));
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, q, 0));
    /* Refilled: the hole only. */
    EXPECT(PAGEALLOC_OK, pagealloc_page_array_fill(arr, 0, &n));
    CHECK(n == N);
    EXPECT(PAGEALLOC_OK, pagealloc_page_array_release(arr));
    EXPECT(PAGEALLOC_OK, pagealloc_page_array_get(arr, 3, &p));
    CHECK(p == PAGEALLOC_HOLE);
    EXPECT(PAGEALLOC_OK, pagealloc_page_array_fill(arr, 0, &n));
    CHECK(n == N);
    /* Destroyed full: its pages go back. */
    EXPECT(PAGEALLOC_OK, pagealloc_page_array_destroy(arr));
    EXPECT(PAGEALLOC_OK, pagealloc_page_array_destroy(NULL));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_array_fill(NULL, 0, &n));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_array_release(NULL));
    EXPECT(PAGEALLOC_OK, pagealloc_drain_all_pages(a));
    EXPECT(PAGEALLOC_OK, pagealloc_check_invariants(a));
    CHECK(pagealloc_nr_free_pages(a) == free0);
}

/* Holes kept out at creation and given later, as a kernel's boot does. */
static void holes(void) {
    pagealloc_config cfg;
    pagealloc *h = NULL;
    pagealloc_config_default(&cfg);
    cfg.arena_bytes = 16 << 20;
    cfg.backing = PAGEALLOC_BACKING_NONE;
    pagealloc_range ranges[2] = {{1024, 1024}, {4000, 96}};
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_create_with_holes(&cfg, NULL, 1, &h));
    CHECK(h == NULL);
    pagealloc_range bad[2] = {{10, 20}, {20, 5}};
    EXPECT(PAGEALLOC_ERR_INVALID_CONFIG, pagealloc_create_with_holes(&cfg, bad, 2, &h));
    EXPECT_LAST(PAGEALLOC_ERR_INVALID_CONFIG, "holes");
    pagealloc_range wraps = {UINT64_MAX, 2};
    EXPECT(PAGEALLOC_ERR_INVALID_CONFIG, pagealloc_create_with_holes(&cfg, &wraps, 1, &h));
    EXPECT(PAGEALLOC_OK, pagealloc_create_with_holes(&cfg, ranges, 2, &h));
    CHECK(pagealloc_managed_pages(h) == 4096 - 1024 - 96);
    EXPECT(PAGEALLOC_ERR_BAD_RANGE, pagealloc_add_free_memory(h, 0, 1));       /* never a hole */
    EXPECT(PAGEALLOC_ERR_BAD_RANGE, pagealloc_add_free_memory(h, 1024, 0));    /* empty */
    EXPECT(PAGEALLOC_ERR_BAD_RANGE, pagealloc_add_free_memory(h, 1000, 100)); /* half in one */
    EXPECT(PAGEALLOC_ERR_BAD_RANGE, pagealloc_add_free_memory(h, 4000, UINT64_MAX - 10));
    EXPECT(PAGEALLOC_OK, pagealloc_add_free_memory(h, 1024, 1024));
    EXPECT(PAGEALLOC_ERR_BAD_RANGE, pagealloc_add_free_memory(h, 1024, 1)); /* given already */
    EXPECT(PAGEALLOC_OK, pagealloc_add_free_memory(h, 4000, 96));
    CHECK(pagealloc_managed_pages(h) == 4096 && pagealloc_nr_free_pages(h) == 4096);
    EXPECT(PAGEALLOC_OK, pagealloc_check_invariants(h));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_add_free_memory(NULL, 0, 1));
    EXPECT(PAGEALLOC_OK, pagealloc_destroy(h));
}

static void isolation(pagealloc *a) {
    uint64_t start;
    bool iso = true;
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_contig_pages(a, 300, PAGEALLOC_GFP_MOVABLE, &start));
    CHECK(start % 256 == 0);
    EXPECT(PAGEALLOC_OK, pagealloc_free_contig_range(a, start, 300));
    EXPECT(PAGEALLOC_ERR_DOUBLE_FREE, pagealloc_free_contig_range(a, start, 300));
    EXPECT(PAGEALLOC_ERR_NO_MEMORY, pagealloc_alloc_contig_pages(a, pagealloc_nr_pages(a) + 1, 0, &start));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_contig_pages(a, 4, 0, NULL));

    EXPECT(PAGEALLOC_OK, pagealloc_drain_all_pages(a));
    const uint64_t blk = pagealloc_nr_pages(a) - 512;
    EXPECT(PAGEALLOC_OK, pagealloc_isolate_range(a, blk, 512));
    EXPECT(PAGEALLOC_OK, pagealloc_test_pages_isolated(a, blk, 512, &iso));
    CHECK(iso);
    EXPECT(PAGEALLOC_ERR_ALREADY_ISOLATED, pagealloc_isolate_range(a, blk, 512));
    EXPECT_LAST(PAGEALLOC_ERR_ALREADY_ISOLATED, "already isolated");
    EXPECT(PAGEALLOC_ERR_DOUBLE_FREE, pagealloc_free_pages(a, blk, 0));
    EXPECT(PAGEALLOC_OK, pagealloc_undo_isolate_range(a, blk, 512));
    EXPECT(PAGEALLOC_ERR_NOT_ISOLATED, pagealloc_undo_isolate_range(a, blk, 512));
    EXPECT(PAGEALLOC_OK, pagealloc_test_pages_isolated(a, blk, 512, &iso));
    CHECK(!iso);
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_test_pages_isolated(a, blk, 512, NULL));
    EXPECT(PAGEALLOC_ERR_BAD_RANGE, pagealloc_isolate_range(a, blk, 1024));
    EXPECT(PAGEALLOC_ERR_BAD_RANGE, pagealloc_isolate_range(a, 0, 0));
    EXPECT(PAGEALLOC_ERR_BAD_RANGE, pagealloc_isolate_range(a, 512, UINT64_MAX - 10));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_isolate_range(a, PAGEALLOC_HOLE, 1));
    EXPECT(PAGEALLOC_ERR_BAD_RANGE, pagealloc_free_contig_range(a, UINT64_MAX - 2, 5));
    EXPECT(PAGEALLOC_OK, pagealloc_check_invariants(a));
}

struct waiter {
    pagealloc *a;
    uint64_t pfn;
    pagealloc_status got;
};

static void *lock_waiter(void *arg) {
    struct waiter *w = arg;
    w->got = pagealloc_lock_page(w->a, w->pfn);
    if (w->got == PAGEALLOC_OK)
        w->got = pagealloc_unlock_page(w->a, w->pfn);
    return NULL;
}

static void *writeback_waiter(void *arg) {
    struct waiter *w = arg;
    w->got = pagealloc_wait_on_page_writeback(w->a, w->pfn);
    return NULL;
}

static void locks(pagealloc *a) {
    uint64_t p, freep;
    bool b = false;
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages(a, PAGEALLOC_GFP_USER, 0, &p));
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages(a, PAGEALLOC_GFP_USER, 0, &freep));
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, freep, 0));

    EXPECT(PAGEALLOC_OK, pagealloc_lock_page(a, p));
    EXPECT(PAGEALLOC_ERR_BUSY, pagealloc_trylock_page(a, p));
    EXPECT(PAGEALLOC_ERR_TIMED_OUT, pagealloc_lock_page_timeout(a, p, 1000000));
    EXPECT_LAST(PAGEALLOC_ERR_TIMED_OUT, "timed out");
    EXPECT(PAGEALLOC_ERR_LOCKED, pagealloc_free_pages(a, p, 0));
    EXPECT_LAST(PAGEALLOC_ERR_LOCKED, "is locked");

    /* Another thread sleeps on the lock until this one lets go. */
    struct waiter w = {a, p, PAGEALLOC_ERR_UNKNOWN};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, lock_waiter, &w) == 0);
    EXPECT(PAGEALLOC_OK, pagealloc_unlock_page(a, p));
    pthread_join(t, NULL);
    CHECK(w.got == PAGEALLOC_OK);

    EXPECT(PAGEALLOC_ERR_NOT_LOCKED, pagealloc_unlock_page(a, p));
    char want[64];
    snprintf(want, sizeof want, "pfn %#" PRIx64 " is not locked", p);
    EXPECT_LAST(PAGEALLOC_ERR_NOT_LOCKED, want);
    EXPECT(PAGEALLOC_ERR_NOT_LOCKED, pagealloc_unlock_page_uptodate(a, p));

    EXPECT(PAGEALLOC_OK, pagealloc_page_uptodate(a, p, &b));
    CHECK(!b);
    EXPECT(PAGEALLOC_OK, pagealloc_trylock_page(a, p));
    EXPECT(PAGEALLOC_OK, pagealloc_unlock_page_uptodate(a, p));
    EXPECT(PAGEALLOC_OK, pagealloc_page_uptodate(a, p, &b));
    CHECK(b);
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_page_uptodate(a, p, NULL));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_page_uptodate(a, pagealloc_nr_pages(a), &b));

    /* Writeback. */
    EXPECT(PAGEALLOC_OK, pagealloc_set_page_writeback(a, p, &b));
    CHECK(b);
    EXPECT(PAGEALLOC_OK, pagealloc_set_page_writeback(a, p, &b));
    CHECK(!b);
    EXPECT(PAGEALLOC_OK, pagealloc_set_page_writeback(a, p, NULL));
    EXPECT(PAGEALLOC_ERR_WRITEBACK, pagealloc_free_pages(a, p, 0));
    EXPECT(PAGEALLOC_ERR_TIMED_OUT, pagealloc_wait_on_page_writeback_timeout(a, p, 1000000));
    struct waiter ww = {a, p, PAGEALLOC_ERR_UNKNOWN};
    CHECK(pthread_create(&t, NULL, writeback_waiter, &ww) == 0);
    EXPECT(PAGEALLOC_OK, pagealloc_end_page_writeback(a, p));
    pthread_join(t, NULL);
    CHECK(ww.got == PAGEALLOC_OK);
    EXPECT(PAGEALLOC_ERR_NOT_WRITEBACK, pagealloc_end_page_writeback(a, p));
    EXPECT(PAGEALLOC_OK, pagealloc_wait_on_page_writeback(a, p));
    EXPECT(PAGEALLOC_OK, pagealloc_wait_on_page_writeback_timeout(a, p, 0));

    /* Pages that are not allocated, or not pages at all. */
    EXPECT(PAGEALLOC_ERR_NOT_ALLOCATED, pagealloc_lock_page(a, freep));
    EXPECT(PAGEALLOC_ERR_BUSY, pagealloc_trylock_page(a, freep));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_lock_page(a, pagealloc_nr_pages(a)));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_trylock_page(a, pagealloc_nr_pages(a)));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_lock_page(a, PAGEALLOC_HOLE));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_unlock_page(a, UINT64_MAX - 1));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_lock_page_timeout(a, PAGEALLOC_HOLE, 1));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_set_page_writeback(a, PAGEALLOC_HOLE, NULL));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_end_page_writeback(a, PAGEALLOC_HOLE));

    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, p, 0));
    EXPECT(PAGEALLOC_OK, pagealloc_check_invariants(a));
}

static void reports(pagealloc *a) {
    int64_t (*fns[4])(const pagealloc *, char *, size_t) = {pagealloc_buddyinfo, pagealloc_pagetypeinfo,
                                                           pagealloc_zoneinfo, pagealloc_vmstat};
    const char *starts[4] = {"Node 0, zone   Normal", "Page block order: 9", "Node 0, zone   Normal",
                             "nr_free_pages "};
    for (int i = 0; i < 4; i++) {
        int64_t need = fns[i](a, NULL, 0);
        CHECK(need > 20);
        char *full = malloc((size_t)need + 1);
        CHECK(fns[i](a, full, (size_t)need + 1) == need);
        CHECK((int64_t)strlen(full) == need);
        CHECK(strncmp(full, starts[i], strlen(starts[i])) == 0);

        /* Tiny buffers: cut short, terminated, never overrun. */
        char tiny[8];
        memset(tiny, 'X', sizeof tiny);
        CHECK(fns[i](a, tiny, 1) == need);
        CHECK(tiny[0] == '\0' && tiny[1] == 'X');
        memset(tiny, 'X', sizeof tiny);
        CHECK(fns[i](a, tiny, 5) == need);
        CHECK(memcmp(tiny, full, 4) == 0 && tiny[4] == '\0' && tiny[5] == 'X');
        memset(tiny, 'X', sizeof tiny);
        CHECK(fns[i](a, tiny, 0) == need);
        CHECK(tiny[0] == 'X');
        /* Exactly the text without room for the NUL: all but its last byte. */
        char *exact = malloc((size_t)need);
        CHECK(fns[i](a, exact, (size_t)need) == need);
        CHECK(exact[need - 1] == '\0' && memcmp(exact, full, (size_t)need - 1) == 0);
        free(exact);
        CHECK(fns[i](a, NULL, 10) == -PAGEALLOC_ERR_INVALID_ARGUMENT);
        free(full);
    }
}

static void *fresh_thread_error(void *arg) {
    char buf[8] = "junk";
    (void)arg;
    /* Another thread's errors are not this thread's. */
    return (void *)(uintptr_t)(pagealloc_last_error() == PAGEALLOC_OK &&
                               pagealloc_last_error_message(buf, sizeof buf) == 0 && buf[0] == '\0');
}

static void last_error(pagealloc *a) {
    EXPECT(PAGEALLOC_ERR_DOUBLE_FREE, pagealloc_free_pages(a, 0, 0));
    size_t need = pagealloc_last_error_message(NULL, 0);
    CHECK(need == strlen("pfn 0x0 is already free (double free)"));
    char tiny[6];
    memset(tiny, 'X', sizeof tiny);
    CHECK(pagealloc_last_error_message(tiny, 4) == need);
    CHECK(memcmp(tiny, "pfn", 3) == 0 && tiny[3] == '\0' && tiny[4] == 'X');
    CHECK(pagealloc_last_error_message(NULL, 100) == need);
    /* Success leaves it alone. */
    uint64_t p;
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages(a, 0, 0, &p));
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, p, 0));
    EXPECT_LAST(PAGEALLOC_ERR_DOUBLE_FREE, "pfn 0x0 is already free");

    pthread_t t;
    void *ret = NULL;
    CHECK(pthread_create(&t, NULL, fresh_thread_error, NULL) == 0);
    pthread_join(t, &ret);
    CHECK(ret == (void *)1);

    CHECK(strcmp(pagealloc_status_name(PAGEALLOC_OK), "PAGEALLOC_OK") == 0);
    CHECK(strcmp(pagealloc_status_name(PAGEALLOC_ERR_WRONG_ORDER), "PAGEALLOC_ERR_WRONG_ORDER") == 0);
    CHECK(strcmp(pagealloc_status_name(-1), "(not a pagealloc status)") == 0);
    CHECK(strcmp(pagealloc_status_name(1000), "(not a pagealloc status)") == 0);
}

/* Several threads on one allocator: pages are theirs alone, and the state adds up. */
struct worker {
    pagealloc *a;
    int bad;
};

static void *churn(void *arg) {
    struct worker *w = arg;
    uint64_t held[64];
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 64; i++) {
            void *addr;
            if (pagealloc_alloc_pages(w->a, PAGEALLOC_GFP_USER, (uint32_t)(i % 3), &held[i]) != PAGEALLOC_OK ||
                pagealloc_page_address(w->a, held[i], &addr) != PAGEALLOC_OK) {
                w->bad++;
                held[i] = PAGEALLOC_HOLE;
                continue;
            }
            *(volatile uint64_t *)addr = held[i];
        }
        for (int i = 0; i < 64; i++) {
            if (held[i] == PAGEALLOC_HOLE)
                continue;
            void *addr;
            pagealloc_page_address(w->a, held[i], &addr);
            if (*(volatile uint64_t *)addr != held[i])
                w->bad++; /* someone else had the page */
            if (pagealloc_free_pages(w->a, held[i], (uint32_t)(i % 3)) != PAGEALLOC_OK)
                w->bad++;
        }
    }
    return NULL;
}

static void threads(pagealloc *a) {
    enum { T = 4 };
    pthread_t t[T];
    struct worker w[T];
    for (int i = 0; i < T; i++) {
        w[i].a = a;
        w[i].bad = 0;
        CHECK(pthread_create(&t[i], NULL, churn, &w[i]) == 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(t[i], NULL);
        CHECK(w[i].bad == 0);
    }
    EXPECT(PAGEALLOC_OK, pagealloc_drain_all_pages(a));
    EXPECT(PAGEALLOC_OK, pagealloc_drain_local_pages(a));
    EXPECT(PAGEALLOC_OK, pagealloc_check_invariants(a));
    CHECK(pagealloc_nr_free_pages(a) == pagealloc_managed_pages(a));
}

/* No-lock calls from a SIGALRM handler (every 50 us) while the main thread
 * allocates and frees through the normal calls. The handler touches only
 * these statics and the no-lock calls. */
enum { NL_SLOTS = 64 };
static pagealloc *nl_alloc;
static uint64_t nl_held[NL_SLOTS]; /* pfn + 1, 0 for none; order = slot % 3 */
static volatile sig_atomic_t nl_runs, nl_ok, nl_would_block, nl_bad, nl_bad_free_code, nl_bad_alloc_code;

static void nl_handler(int sig) {
    (void)sig;
    for (int k = 0; k < 4; k++) {
        int i = (nl_runs * 4 + k) % NL_SLOTS;
        uint32_t order = (uint32_t)(i % 3);
        if (nl_held[i] != 0) {
            pagealloc_status fs = pagealloc_free_pages_nolock(nl_alloc, nl_held[i] - 1, order);
            if (fs != PAGEALLOC_OK) {
                nl_bad++;
                nl_bad_free_code = fs;
            }
            nl_held[i] = 0;
        }
        uint64_t p;
        pagealloc_status s = pagealloc_alloc_pages_nolock(nl_alloc, PAGEALLOC_GFP_KERNEL, order, &p);
        if (s == PAGEALLOC_OK) {
            nl_held[i] = p + 1;
            nl_ok++;
        } else if (s == PAGEALLOC_ERR_WOULD_BLOCK) {
            nl_would_block++;
        } else if (s != PAGEALLOC_ERR_NO_MEMORY) {
            nl_bad++;
            nl_bad_alloc_code = s;
        }
    }
    nl_runs++;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nolock(pagealloc *a) {
    uint64_t p = 0;
    /* Plain use, every order the lists keep and one they do not. */
    for (uint32_t order = 0; order <= 10; order += 1) {
        EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages_nolock(a, PAGEALLOC_GFP_KERNEL, order, &p));
        CHECK(p % ((uint64_t)1 << order) == 0);
        EXPECT(PAGEALLOC_OK, pagealloc_free_pages_nolock(a, p, order));
    }
    /* Bad inputs: a code each, and the last error left as it was (these
     * calls record nothing: recording allocates). */
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_free_pages(a, (uint64_t)1 << 40, 0));
    EXPECT(PAGEALLOC_ERR_DOUBLE_FREE, pagealloc_free_pages_nolock(a, p, 10));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_free_pages_nolock(a, PAGEALLOC_HOLE, 0));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_pages_nolock(NULL, PAGEALLOC_GFP_KERNEL, 0, &p));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_pages_nolock(a, PAGEALLOC_GFP_KERNEL, 0, NULL));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_alloc_pages_nolock(a, 0x80000000u, 0, &p));
    EXPECT(PAGEALLOC_ERR_INVALID_ORDER, pagealloc_alloc_pages_nolock(a, PAGEALLOC_GFP_KERNEL, 11, &p));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_free_pages_nolock(NULL, 0, 0));
    EXPECT_LAST(PAGEALLOC_ERR_OUT_OF_RANGE, "out of range");
    CHECK(strcmp(pagealloc_status_name(PAGEALLOC_ERR_WOULD_BLOCK), "PAGEALLOC_ERR_WOULD_BLOCK") == 0);

    /* The signal loop. */
    nl_alloc = a;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = nl_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
    struct itimerval it = {{0, 50}, {0, 50}};
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
    enum { KEEP = 512 };
    static uint64_t mine[KEEP];
    int n = 0;
    unsigned x = 12345;
    double t0 = now_s();
    while (now_s() - t0 < 0.3) {
        x = x * 1103515245u + 12345u;
        if (n < KEEP && (x >> 16) % 3 != 0) {
            if (pagealloc_alloc_pages(a, PAGEALLOC_GFP_KERNEL, 0, &mine[n]) == PAGEALLOC_OK)
                n++;
        } else if (n > 0) {
            int i = (int)((x >> 8) % (unsigned)n);
            CHECK(pagealloc_free_pages(a, mine[i], 0) == PAGEALLOC_OK);
            mine[i] = mine[--n];
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGALRM, &sa, NULL);
    while (n > 0)
        CHECK(pagealloc_free_pages(a, mine[--n], 0) == PAGEALLOC_OK);
    for (int i = 0; i < NL_SLOTS; i++)
        if (nl_held[i] != 0)
            EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, nl_held[i] - 1, (uint32_t)(i % 3)));
    printf("api_test: nolock: %d handler runs, %d allocations, %d would-block, %d unexpected (last free %s, last "
           "alloc %s)\n",
           (int)nl_runs, (int)nl_ok, (int)nl_would_block, (int)nl_bad,
           pagealloc_status_name((pagealloc_status)nl_bad_free_code),
           pagealloc_status_name((pagealloc_status)nl_bad_alloc_code));
    CHECK(nl_runs > 0 && nl_ok > 0 && nl_bad == 0);
    EXPECT(PAGEALLOC_OK, pagealloc_drain_all_pages(a));
    EXPECT(PAGEALLOC_OK, pagealloc_check_invariants(a));
    CHECK(pagealloc_nr_free_pages(a) == pagealloc_managed_pages(a));
}

int main(void) {
    config_and_lifecycle();
    bad_handles();
    holes();
    pagealloc *a = make(32 << 20, PAGEALLOC_BACKING_ANONYMOUS);
    alloc_free(a);
    bulk(a);
    page_arrays(a);
    isolation(a);
    locks(a);
    reports(a);
    last_error(a);
    threads(a);
    nolock(a);
    EXPECT(PAGEALLOC_OK, pagealloc_destroy(a));
    if (failures) {
        fprintf(stderr, "api_test: %d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("api_test: all %d checks passed\n", checks);
    return 0;
}
