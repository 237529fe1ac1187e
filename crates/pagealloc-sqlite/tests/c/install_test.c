/* "From C one call": install, then use SQLite unchanged. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdint.h>
#include "pagealloc_sqlite.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); return 1; } } while (0)

int main(void) {
	uint64_t t[5], o[3];
	/* A budget under one page is refused; SQLite keeps its own cache. */
	CHECK(pagealloc_sqlite_install(64u << 20, 100, 0) == SQLITE_ERROR);
	CHECK(pagealloc_sqlite_overdraft(o) == -1);
	/* 64 KiB: the in-memory database below (about 600 KB, none of it
	 * evictable) is served over the budget, up to the hard cap (the arena). */
	CHECK(pagealloc_sqlite_install(64u << 20, 64u << 10, 0) == SQLITE_OK);
	CHECK(pagealloc_sqlite_install(64u << 20, 0, 0) == SQLITE_MISUSE);
	CHECK(pagealloc_sqlite_totals(t) == 0 && t[0] == 0);

	sqlite3 *db;
	sqlite3_stmt *st;
	CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db,
		"CREATE TABLE t(x, pad);"
		"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 5000)"
		" INSERT INTO t SELECT i, randomblob(100) FROM c;", 0, 0, 0) == SQLITE_OK);
	CHECK(sqlite3_prepare_v2(db, "SELECT sum(x) FROM t", -1, &st, 0) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW);
	CHECK(sqlite3_column_int64(st, 0) == 5000LL * 5001 / 2);
	sqlite3_finalize(st);
	CHECK(sqlite3_close(db) == SQLITE_OK);

	CHECK(pagealloc_sqlite_totals(t) == 0);
	CHECK(t[0] >= 1 && t[1] > 100 && t[2] > 0);
	/* Closed: the overdraft went back; its peak and count stay. */
	CHECK(pagealloc_sqlite_overdraft(o) == 0);
	CHECK(o[0] == 0 && o[1] > 500000 && o[2] > 100);
	printf("overdraft now %llu peak %llu times %llu\n", (unsigned long long)o[0],
	       (unsigned long long)o[1], (unsigned long long)o[2]);
	printf("caches %llu fetches %llu hits %llu\n", (unsigned long long)t[0],
	       (unsigned long long)t[1], (unsigned long long)t[2]);
	return 0;
}
