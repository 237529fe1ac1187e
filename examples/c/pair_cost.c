/*
 * The cost of one order-0 alloc+free pair through the C API: N pairs in a
 * loop, best and median of REPEATS runs, in ns per pair. MODE "call" (the
 * default) calls pagealloc_alloc_pages / pagealloc_free_pages; "inline" uses
 * a thread cache and pagealloc_inline.h's pagealloc_tc_alloc_page /
 * pagealloc_tc_free_page (the front-cache hit inlined here). The same loop through
 * the Rust API runs in `cargo run --release -p pagealloc-capi --example
 * pair_cost`, which also builds and runs this program for a side-by-side
 * figure.
 *
 *   cargo build --release -p pagealloc-capi
 *   cc -O2 -I include examples/c/pair_cost.c target/release/libpagealloc_c.a \
 *      -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc -o pair_cost
 *   ./pair_cost [N] [REPEATS] [call|inline]
 */
#define _POSIX_C_SOURCE 200809L
#include "pagealloc_inline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    int repeats = argc > 2 ? atoi(argv[2]) : 5;
    int inl = argc > 3 && strcmp(argv[3], "inline") == 0;
    if (n < 1 || repeats < 1 || repeats > 100 || (argc > 3 && !inl && strcmp(argv[3], "call") != 0)) {
        fprintf(stderr, "usage: %s [N] [REPEATS] [call|inline]\n", argv[0]);
        return 2;
    }
    /* The same allocator as the Rust side: 64 MiB, no backing memory. */
    pagealloc_config cfg;
    pagealloc *a;
    pagealloc_config_default(&cfg);
    cfg.arena_bytes = 64 << 20;
    cfg.backing = PAGEALLOC_BACKING_NONE;
    if (pagealloc_create(&cfg, &a) != PAGEALLOC_OK)
        return 1;
    pagealloc_tcache *tc;
    if (pagealloc_tcache_create(a, &tc) != PAGEALLOC_OK)
        return 1;

    double ns[100];
    unsigned long long bad = 0;
    for (int r = -1; r < repeats; r++) { /* r == -1: warm-up */
        double t0 = now_ns();
        if (inl) {
            pagealloc_tcache *const t = tc; /* a local the calls cannot change */
            for (long i = 0; i < n; i++) {
                uint64_t p = pagealloc_tc_alloc(t, PAGEALLOC_GFP_KERNEL);
                bad += p == PAGEALLOC_HOLE;
                bad += pagealloc_tc_free_page(t, p) != PAGEALLOC_OK;
            }
        } else {
            for (long i = 0; i < n; i++) {
                uint64_t p;
                bad += pagealloc_alloc_pages(a, PAGEALLOC_GFP_KERNEL, 0, &p) != PAGEALLOC_OK;
                bad += pagealloc_free_pages(a, p, 0) != PAGEALLOC_OK;
            }
        }
        if (r >= 0)
            ns[r] = (now_ns() - t0) / (double)n;
    }
    qsort(ns, (size_t)repeats, sizeof ns[0], cmp);
    printf("C API pair (%s): best %.2f ns, median %.2f ns (%ld pairs x %d)\n", inl ? "inline" : "call", ns[0],
           ns[repeats / 2], n, repeats);
    bad += pagealloc_tcache_destroy(tc) != PAGEALLOC_OK;
    bad += pagealloc_destroy(a) != PAGEALLOC_OK;
    return bad != 0;
}
