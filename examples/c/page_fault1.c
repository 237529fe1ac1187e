/*
 * will-it-scale's page_fault1 on pagealloc's C API: each thread allocates
 * 32768 order-0 pages (128 MiB) one at a time, writes one byte to each, then
 * frees them all; it repeats until the time is up. Prints iterations (pages
 * written) per second, in total and per thread. MODE "call" (the default)
 * takes each page with pagealloc_alloc_pages and pagealloc_page_address;
 * "inline" with a thread cache's pagealloc_tc_alloc and
 * pagealloc_tc_page_address (pagealloc_inline.h).
 *
 *   cargo build --release -p pagealloc-capi
 *   cc -O2 -I include examples/c/page_fault1.c target/release/libpagealloc_c.a \
 *      -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc -o page_fault1
 *   ./page_fault1 [THREADS] [SECONDS] [call|inline]
 */
#define _POSIX_C_SOURCE 200809L
#include "pagealloc_inline.h"

#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NR_PAGES 32768

static pagealloc *alloc;
static atomic_int stop;
static int inline_mode;

struct worker {
    pthread_t thread;
    unsigned long long iterations;
    int failed;
} __attribute__((aligned(128)));

static void fail(const char *what, pagealloc_status s) {
    char msg[256];
    pagealloc_last_error_message(msg, sizeof msg);
    fprintf(stderr, "page_fault1: %s: %s: %s\n", what, pagealloc_status_name(s), msg);
}

static void *worker(void *arg) {
    struct worker *w = arg;
    uint64_t *pfns = malloc(sizeof(uint64_t) * NR_PAGES);
    if (pfns == NULL) {
        w->failed = 1;
        return NULL;
    }
    pagealloc_tcache *tc = NULL;
    if (inline_mode && pagealloc_tcache_create(alloc, &tc) != PAGEALLOC_OK) {
        fail("tcache", pagealloc_last_error());
        w->failed = 1;
        return NULL;
    }
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (size_t i = 0; i < NR_PAGES; i++) {
            void *addr;
            if (tc) {
                pfns[i] = pagealloc_tc_alloc(tc, PAGEALLOC_GFP_USER);
                addr = pfns[i] == PAGEALLOC_HOLE ? NULL : pagealloc_tc_page_address(tc, pfns[i]);
                if (addr == NULL) {
                    fail("alloc", pagealloc_last_error());
                    w->failed = 1;
                    return NULL;
                }
            } else {
                pagealloc_status s = pagealloc_alloc_pages(alloc, PAGEALLOC_GFP_USER, 0, &pfns[i]);
                if (s == PAGEALLOC_OK)
                    s = pagealloc_page_address(alloc, pfns[i], &addr);
                if (s != PAGEALLOC_OK) {
                    fail("alloc", s);
                    w->failed = 1;
                    return NULL;
                }
            }
            *(volatile char *)addr = 1;
        }
        size_t rejected = 0;
        pagealloc_status s = pagealloc_free_pages_bulk(alloc, pfns, NR_PAGES, &rejected, NULL);
        if (s != PAGEALLOC_OK) {
            fail("free", s);
            w->failed = 1;
            return NULL;
        }
        w->iterations += NR_PAGES;
    }
    pagealloc_tcache_destroy(tc);
    free(pfns);
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    double seconds = argc > 2 ? atof(argv[2]) : 5.0;
    inline_mode = argc > 3 && strcmp(argv[3], "inline") == 0;
    if (threads < 1 || threads > 256 || !(seconds > 0) || (argc > 3 && !inline_mode && strcmp(argv[3], "call"))) {
        fprintf(stderr, "usage: %s [THREADS] [SECONDS] [call|inline]\n", argv[0]);
        return 2;
    }

    /* 128 MiB a thread plus room for the watermarks and per-CPU lists. */
    pagealloc_config cfg;
    pagealloc_config_default(&cfg);
    cfg.arena_bytes = ((uint64_t)threads * 128 + 256) << 20;
    pagealloc_status s = pagealloc_create(&cfg, &alloc);
    if (s != PAGEALLOC_OK) {
        fail("create", s);
        return 1;
    }

    struct worker *ws = calloc((size_t)threads, sizeof *ws);
    double t0 = now();
    for (int i = 0; i < threads; i++)
        pthread_create(&ws[i].thread, NULL, worker, &ws[i]);
    struct timespec nap = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&nap, NULL);
    atomic_store(&stop, 1);
    unsigned long long total = 0;
    int failed = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ws[i].thread, NULL);
        total += ws[i].iterations;
        failed |= ws[i].failed;
    }
    double dt = now() - t0;

    s = pagealloc_check_invariants(alloc);
    if (s != PAGEALLOC_OK) {
        fail("check_invariants", s);
        failed = 1;
    }
    printf("page_fault1 (C API, %s): threads %d, %.2f s, %llu iterations, %.0f iterations/s, %.0f per thread\n",
           inline_mode ? "inline" : "call", threads, dt, total, (double)total / dt, (double)total / dt / threads);
    if (pagealloc_destroy(alloc) != PAGEALLOC_OK)
        failed = 1;
    free(ws);
    return failed;
}
