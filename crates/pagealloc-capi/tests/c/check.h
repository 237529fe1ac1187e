/*
 * The C tests' checks: CHECK(cond) and EXPECT(want, call) count every check
 * and report each failure with its file and line (EXPECT with the status's
 * name and the calling thread's last error). A test's main prints the tally
 * and exits non-zero when `failures` is.
 */
#ifndef PAGEALLOC_TEST_CHECK_H
#define PAGEALLOC_TEST_CHECK_H

#include <stdio.h>

static int checks, failures;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        checks++;                                                                   \
        if (!(cond)) {                                                              \
            failures++;                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

/* A call that must return `want`; prints the code's name and message if not. */
#define EXPECT(want, call)                                                          \
    do {                                                                            \
        pagealloc_status got_ = (call);                                             \
        checks++;                                                                   \
        if (got_ != (want)) {                                                       \
            char m_[256];                                                           \
            pagealloc_last_error_message(m_, sizeof m_);                            \
            failures++;                                                             \
            fprintf(stderr, "%s:%d: %s returned %s, want %s (last error: %s)\n",    \
                    __FILE__, __LINE__, #call, pagealloc_status_name(got_),         \
                    pagealloc_status_name(want), m_);                               \
        }                                                                           \
    } while (0)

#endif
