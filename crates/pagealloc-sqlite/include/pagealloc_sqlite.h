/* pagealloc-sqlite: SQLite's page cache on pagealloc (libpagealloc_sqlite.so).
 *
 * Call one install function before the first connection (before
 * sqlite3_initialize), or load the library with LD_PRELOAD and set the
 * PAGEALLOC_SQLITE_* variables instead (see the crate's README). */
#ifndef PAGEALLOC_SQLITE_H
#define PAGEALLOC_SQLITE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Install with an arena of arena_bytes (a multiple of 2 MiB), a budget of
 * budget_bytes (0: the whole arena) and transparent hugepages if hugepages
 * != 0; the hard cap, up to which SQLite's createFlag 2 may overdraw the
 * budget, is the arena (PAGEALLOC_SQLITE_HARD_CAP with
 * pagealloc_sqlite_install_from_env sets another). Returns SQLITE_OK,
 * SQLITE_MISUSE (installed already, or SQLite initialised) or SQLITE_ERROR
 * (a bad size; the reason on stderr). */
int pagealloc_sqlite_install(uint64_t arena_bytes, uint64_t budget_bytes, int hugepages);

/* Install as the PAGEALLOC_SQLITE_* variables say; the arena is built at the
 * first cache. Same return codes. */
int pagealloc_sqlite_install_from_env(void);

/* Totals since install: caches created, fetches, hits, misses, evictions.
 * Returns 0, or -1 (out untouched) when no cache was created yet. */
int pagealloc_sqlite_totals(uint64_t out[5]);

/* The overdraft: bytes charged over the budget now, the most ever, and the
 * pages created over the budget. Returns 0, or -1 (out untouched) when no
 * cache was created yet. */
int pagealloc_sqlite_overdraft(uint64_t out[3]);

#ifdef __cplusplus
}
#endif

#endif
