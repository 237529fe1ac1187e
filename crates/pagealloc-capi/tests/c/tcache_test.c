/*
 * Thread caches and the header-inline fast path (pagealloc_inline.h) from C:
 * the same results as the library calls, every bad input refused with its
 * code, the counters kept, and the front cache's protocol holding against
 * drains, stale frees from other threads, foreign threads using a cache, and
 * a thread that exits without destroying its cache. Every scenario ends with
 * pagealloc_check_invariants and exact conservation of pages. Built and run
 * by tests/c_api.rs (statically and against the shared library); exits 0
 * when every check passes.
 */
#define _GNU_SOURCE
#include "pagealloc_inline.h"
#include "check.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pagealloc *make(uint64_t bytes) {
    pagealloc_config cfg;
    pagealloc *a = NULL;
    pagealloc_config_default(&cfg);
    cfg.arena_bytes = bytes;
    cfg.backing = PAGEALLOC_BACKING_NONE;
    if (pagealloc_create(&cfg, &a) != PAGEALLOC_OK) {
        fprintf(stderr, "pagealloc_create failed\n");
        exit(1);
    }
    return a;
}

/* Every page back where a drain finds it, the allocator whole, and as many
 * pages free as at the start. */
static void expect_whole(pagealloc *a, uint64_t free0, const char *what) {
    EXPECT(PAGEALLOC_OK, pagealloc_drain_all_pages(a));
    EXPECT(PAGEALLOC_OK, pagealloc_check_invariants(a));
    uint64_t f = pagealloc_nr_free_pages(a);
    checks++;
    if (f != free0) {
        failures++;
        fprintf(stderr, "%s: %" PRIu64 " pages free, want %" PRIu64 "\n", what, f, free0);
    }
}

/* A /proc/vmstat counter of the allocator. */
static uint64_t vmstat(pagealloc *a, const char *key) {
    static char buf[16384];
    if (pagealloc_vmstat(a, buf, sizeof buf) < 0)
        return UINT64_MAX;
    size_t k = strlen(key);
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, key, k) == 0 && l[k] == ' ')
            return strtoull(l + k + 1, NULL, 10);
    return UINT64_MAX;
}

/* Same thread: every gfp type, the pfn and status forms, and the counters. */
static void same_thread(void) {
    pagealloc *a = make(64 << 20);
    uint64_t free0 = (pagealloc_drain_all_pages(a), pagealloc_nr_free_pages(a));
    pagealloc_tcache *tc = NULL;
    EXPECT(PAGEALLOC_OK, pagealloc_tcache_create(a, &tc));
    CHECK(tc != NULL);
    const uint32_t gfps[] = {PAGEALLOC_GFP_KERNEL, PAGEALLOC_GFP_MOVABLE, PAGEALLOC_GFP_RECLAIMABLE,
                             PAGEALLOC_GFP_MOVABLE | PAGEALLOC_GFP_RECLAIMABLE, PAGEALLOC_GFP_HIGH,
                             PAGEALLOC_GFP_ZERO};
    enum { N = 500 };
    static uint64_t held[N];
    uint64_t pgfree0 = vmstat(a, "pgfree");
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < N; i++) {
            uint32_t g = gfps[(i + round) % 6];
            if (i % 2) {
                EXPECT(PAGEALLOC_OK, pagealloc_tc_alloc_page(tc, g, &held[i]));
            } else {
                held[i] = pagealloc_tc_alloc(tc, g);
                CHECK(held[i] != PAGEALLOC_HOLE);
            }
            for (int j = 0; j < i; j++)
                if (held[j] == held[i]) {
                    CHECK(!"a held pfn handed out twice");
                    break;
                }
        }
        for (int i = 0; i < N; i++)
            EXPECT(PAGEALLOC_OK, pagealloc_tc_free_page(tc, held[(i * 7) % N]));
    }
    CHECK(vmstat(a, "pgfree") - pgfree0 >= 20 * N);
    expect_whole(a, free0, "same thread");

    /* A page allocated by the library call and freed inline, and back. */
    uint64_t p;
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages(a, PAGEALLOC_GFP_KERNEL, 0, &p));
    EXPECT(PAGEALLOC_OK, pagealloc_tc_free_page(tc, p));
    EXPECT(PAGEALLOC_OK, pagealloc_tc_alloc_page(tc, PAGEALLOC_GFP_KERNEL, &p));
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, p, 0));

    /* The allocator refuses to go while a cache lives. */
    EXPECT(PAGEALLOC_ERR_BUSY, pagealloc_destroy(a));
    EXPECT(PAGEALLOC_OK, pagealloc_tcache_destroy(tc));
    expect_whole(a, free0, "same thread, after destroy");
    EXPECT(PAGEALLOC_OK, pagealloc_destroy(a));
}

/* Bad inputs: each its code, nothing changed. */
static void bad_inputs(void) {
    pagealloc *a = make(16 << 20);
    uint64_t free0 = (pagealloc_drain_all_pages(a), pagealloc_nr_free_pages(a));
    pagealloc_tcache *tc = NULL;
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_tcache_create(NULL, &tc));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_tcache_create(a, NULL));
    /* A header of another layout version: refused, *out NULL, nothing made. */
    tc = (pagealloc_tcache *)&free0;
    EXPECT(PAGEALLOC_ERR_ABI_MISMATCH, pagealloc_tcache_create_abi(a, PAGEALLOC_INLINE_ABI_VERSION + 1, &tc));
    if (tc != NULL) {
        fprintf(stderr, "FAIL: an ABI mismatch left *out set\n");
        exit(1);
    }
    EXPECT(PAGEALLOC_OK, pagealloc_tcache_create(a, &tc));
    EXPECT(PAGEALLOC_OK, pagealloc_tcache_destroy(NULL));

    uint64_t p, q, big;
    EXPECT(PAGEALLOC_OK, pagealloc_tc_alloc_page(tc, PAGEALLOC_GFP_KERNEL, &p));
    EXPECT(PAGEALLOC_OK, pagealloc_tc_free_page(tc, p));
    EXPECT(PAGEALLOC_ERR_DOUBLE_FREE, pagealloc_tc_free_page(tc, p));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_tc_free_page(tc, pagealloc_nr_pages(a)));
    EXPECT(PAGEALLOC_ERR_OUT_OF_RANGE, pagealloc_tc_free_page(tc, PAGEALLOC_HOLE));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_tc_free_page(NULL, 0));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_tc_alloc_page(NULL, PAGEALLOC_GFP_KERNEL, &q));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_tc_alloc_page(tc, PAGEALLOC_GFP_KERNEL, NULL));
    EXPECT(PAGEALLOC_ERR_INVALID_ARGUMENT, pagealloc_tc_alloc_page(tc, 1u << 30, &q));
    CHECK(pagealloc_tc_alloc(NULL, PAGEALLOC_GFP_KERNEL) == PAGEALLOC_HOLE);
    CHECK(pagealloc_last_error() == PAGEALLOC_ERR_INVALID_ARGUMENT);
    CHECK(pagealloc_tc_alloc(tc, 1u << 30) == PAGEALLOC_HOLE);

    /* An order-2 block: its head is not an order-0 page, its tail not a head. */
    EXPECT(PAGEALLOC_OK, pagealloc_alloc_pages(a, PAGEALLOC_GFP_KERNEL, 2, &big));
    EXPECT(PAGEALLOC_ERR_WRONG_ORDER, pagealloc_tc_free_page(tc, big));
    EXPECT(PAGEALLOC_ERR_INSIDE_BLOCK, pagealloc_tc_free_page(tc, big + 1));
    EXPECT(PAGEALLOC_OK, pagealloc_free_pages(a, big, 2));

    /* A locked page cannot be freed, inline or not. */
    EXPECT(PAGEALLOC_OK, pagealloc_tc_alloc_page(tc, PAGEALLOC_GFP_KERNEL, &q));
    EXPECT(PAGEALLOC_OK, pagealloc_trylock_page(a, q));
    EXPECT(PAGEALLOC_ERR_LOCKED, pagealloc_tc_free_page(tc, q));
    EXPECT(PAGEALLOC_OK, pagealloc_unlock_page(a, q));
    EXPECT(PAGEALLOC_OK, pagealloc_tc_free_page(tc, q));

    EXPECT(PAGEALLOC_OK, pagealloc_tcache_destroy(tc));
    expect_whole(a, free0, "bad inputs");
    EXPECT(PAGEALLOC_OK, pagealloc_destroy(a));
}

/* Page addresses: inline with backing memory, the call's answer without. */
static void addresses(void) {
    pagealloc_config cfg;
    pagealloc *a = NULL;
    pagealloc_config_default(&cfg);
    cfg.arena_bytes = 16 << 20;
    cfg.backing = PAGEALLOC_BACKING_ANONYMOUS;
    EXPECT(PAGEALLOC_OK, pagealloc_create(&cfg, &a));
    pagealloc_tcache *tc = NULL;
    EXPECT(PAGEALLOC_OK, pagealloc_tcache_create(a, &tc));
    uint64_t p = pagealloc_tc_alloc(tc, PAGEALLOC_GFP_USER);
    void *want = NULL, *got = pagealloc_tc_page_address(tc, p);
    EXPECT(PAGEALLOC_OK, pagealloc_page_address(a, p, &want));
    CHECK(got != NULL && got == want);
    if (got)
        memset(got, 0xa5, 4096);
    CHECK(pagealloc_tc_page_address(tc, pagealloc_nr_pages(a)) == NULL);
    CHECK(pagealloc_last_error() == PAGEALLOC_ERR_OUT_OF_RANGE);
    CHECK(pagealloc_tc_page_address(NULL, p) == NULL);
    EXPECT(PAGEALLOC_OK, pagealloc_tc_free_page(tc, p));
    EXPECT(PAGEALLOC_OK, pagealloc_tcache_destroy(tc));
    EXPECT(PAGEALLOC_OK, pagealloc_destroy(a));

    /* Without backing memory there is no address, inline or not. */
    a = make(16 << 20);
    EXPECT(PAGEALLOC_OK, pagealloc_tcache_create(a, &tc));
    p = pagealloc_tc_alloc(tc, PAGEALLOC_GFP_USER);
    CHECK(pagealloc_tc_page_address(tc, p) == NULL);
    EXPECT(PAGEALLOC_OK, pagealloc_tc_free_page(tc, p));
    EXPECT(PAGEALLOC_OK, pagealloc_tcache_destroy(tc));
    EXPECT(PAGEALLOC_OK, pagealloc_destroy(a));
}

/* xorshift64 */
static uint64_t next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

struct race {
    pagealloc *a;
    pagealloc_tcache *shared_tc; /* owner 0's cache, used by the foreign thread too */
    int foreign_done;
    int stop;
    long ops, errors, failures, foreign_ops;
};

struct worker {
    struct race *r;
    int idx;
};

static int stopped(struct race *r) {
    return __atomic_load_n(&r->stop, __ATOMIC_ACQUIRE);
}

/* An owner: inline allocations and frees holding up to 64 pages. */
static void *owner(void *arg) {
    struct worker *w = arg;
    struct race *r = w->r;
    pagealloc_tcache *tc;
    if (pagealloc_tcache_create(r->a, &tc) != PAGEALLOC_OK) {
        fprintf(stderr, "pagealloc_tcache_create failed\n");
        __atomic_add_fetch(&r->failures, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    if (w->idx == 0)
        __atomic_store_n(&r->shared_tc, tc, __ATOMIC_RELEASE);
    uint64_t held[64], s = 0x9e3779b97f4a7c15u + (uint64_t)w->idx;
    int n = 0;
    long ops = 0, errors = 0;
    while (!stopped(r)) {
        uint64_t x = next(&s);
        if (n < 64 && (n == 0 || x % 3)) {
            uint64_t p = pagealloc_tc_alloc(tc, (uint32_t)(x >> 8) % 3);
            if (p != PAGEALLOC_HOLE)
                held[n++] = p;
        } else {
            int i = (int)((x >> 16) % (uint64_t)n);
            /* A stale free by another thread may have freed it already. */
            errors += pagealloc_tc_free_page(tc, held[i]) != PAGEALLOC_OK;
            held[i] = held[--n];
        }
        ops++;
    }
    while (n > 0)
        errors += pagealloc_tc_free_page(tc, held[--n]) != PAGEALLOC_OK;
    if (w->idx == 0) /* the foreign thread may still be using it */
        while (!__atomic_load_n(&r->foreign_done, __ATOMIC_ACQUIRE))
            sched_yield();
    pagealloc_tcache_destroy(tc);
    __atomic_add_fetch(&r->ops, ops, __ATOMIC_RELAXED);
    __atomic_add_fetch(&r->errors, errors, __ATOMIC_RELAXED);
    return NULL;
}

/* Drains racing the owners' inline operations. */
static void *drainer(void *arg) {
    struct race *r = ((struct worker *)arg)->r;
    while (!stopped(r)) {
        if (pagealloc_drain_all_pages(r->a) != PAGEALLOC_OK) {
            fprintf(stderr, "drain failed\n");
            __atomic_add_fetch(&r->failures, 1, __ATOMIC_RELAXED);
        }
        sched_yield();
    }
    return NULL;
}

/* Stale frees: random pfns freed through this thread's own cache (most are
 * refused; some free a page an owner holds, as a racing double free may). */
static void *stale(void *arg) {
    struct race *r = ((struct worker *)arg)->r;
    pagealloc_tcache *tc;
    if (pagealloc_tcache_create(r->a, &tc) != PAGEALLOC_OK) {
        fprintf(stderr, "pagealloc_tcache_create failed\n");
        __atomic_add_fetch(&r->failures, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    uint64_t s = 0x2545f4914f6cdd1du, n = pagealloc_nr_pages(r->a);
    while (!stopped(r)) {
        uint64_t x = next(&s);
        pagealloc_tc_free_page(tc, x % n);
        if (x % 8 == 0) {
            uint64_t p = pagealloc_tc_alloc(tc, PAGEALLOC_GFP_KERNEL);
            if (p != PAGEALLOC_HOLE)
                pagealloc_tc_free_page(tc, p);
        }
    }
    pagealloc_tcache_destroy(tc);
    return NULL;
}

/* A foreign thread using owner 0's cache: its calls take the library path
 * (the cache is another thread's), and work. */
static void *foreign(void *arg) {
    struct race *r = ((struct worker *)arg)->r;
    pagealloc_tcache *tc;
    while ((tc = __atomic_load_n(&r->shared_tc, __ATOMIC_ACQUIRE)) == NULL)
        sched_yield();
    long bad = 0;
    while (!stopped(r)) {
        uint64_t p = pagealloc_tc_alloc(tc, PAGEALLOC_GFP_MOVABLE);
        if (p == PAGEALLOC_HOLE)
            continue;
        __atomic_add_fetch(&r->foreign_ops, 1, __ATOMIC_RELAXED);
        /* A stale free may have freed it first: then the page is free (alone
         * or inside a merged block), and this free is refused as misuse. */
        pagealloc_status st = pagealloc_tc_free_page(tc, p);
        if (st != PAGEALLOC_OK && st != PAGEALLOC_ERR_DOUBLE_FREE && st != PAGEALLOC_ERR_INSIDE_BLOCK &&
            st != PAGEALLOC_ERR_NOT_ALLOCATED) {
            fprintf(stderr, "foreign free of pfn %" PRIu64 ": %s\n", p, pagealloc_status_name(st));
            bad++;
        }
    }
    __atomic_store_n(&r->foreign_done, 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&r->failures, bad, __ATOMIC_RELAXED);
    return NULL;
}

static void race(double seconds) {
    struct race r = {.a = make(8 << 20)};
    uint64_t free0 = (pagealloc_drain_all_pages(r.a), pagealloc_nr_free_pages(r.a));
    enum { T = 6 };
    void *(*fn[T])(void *) = {owner, owner, owner, drainer, stale, foreign};
    pthread_t t[T];
    struct worker w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (struct worker){.r = &r, .idx = i};
        pthread_create(&t[i], NULL, fn[i], &w[i]);
    }
    /* Every thread under way (the foreign one last to start) before the clock. */
    while (__atomic_load_n(&r.foreign_ops, __ATOMIC_RELAXED) == 0)
        sched_yield();
    struct timespec ts = {.tv_sec = (time_t)seconds, .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    CHECK(r.ops > 1000);
    CHECK(r.failures == 0);
    printf("race: %ld owner operations, %ld of their frees refused (pages a stale free had freed), "
           "%ld foreign allocations\n",
           r.ops, r.errors, r.foreign_ops);
    expect_whole(r.a, free0, "race");
    EXPECT(PAGEALLOC_OK, pagealloc_destroy(r.a));
}

/* A thread that exits with its cache alive and pages in its front cache. */
struct leaver {
    pagealloc *a;
    pagealloc_tcache *tc;
};

static void *leave(void *arg) {
    struct leaver *l = arg;
    uint64_t p[40];
    pagealloc_tcache_create(l->a, &l->tc);
    for (int i = 0; i < 40; i++)
        p[i] = pagealloc_tc_alloc(l->tc, PAGEALLOC_GFP_KERNEL);
    for (int i = 0; i < 40; i++)
        pagealloc_tc_free_page(l->tc, p[i]);
    return NULL; /* the cache is left behind */
}

static void exited_owner(void) {
    struct leaver l = {.a = make(16 << 20)};
    uint64_t free0 = (pagealloc_drain_all_pages(l.a), pagealloc_nr_free_pages(l.a));
    pthread_t t;
    pthread_create(&t, NULL, leave, &l);
    pthread_join(t, NULL);
    expect_whole(l.a, free0, "exited owner");
    /* Its cache still works from here (through the library calls). */
    uint64_t p = pagealloc_tc_alloc(l.tc, PAGEALLOC_GFP_KERNEL);
    CHECK(p != PAGEALLOC_HOLE);
    EXPECT(PAGEALLOC_OK, pagealloc_tc_free_page(l.tc, p));
    EXPECT(PAGEALLOC_OK, pagealloc_tcache_destroy(l.tc));
    expect_whole(l.a, free0, "exited owner, after destroy");
    EXPECT(PAGEALLOC_OK, pagealloc_destroy(l.a));
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    same_thread();
    bad_inputs();
    addresses();
    race(seconds);
    exited_owner();
    if (failures) {
        printf("%d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("all %d checks passed\n", checks);
    return 0;
}
