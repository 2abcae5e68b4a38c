/* Shared by the native test libraries (native_sweep.c, thread_names.c):
 * the calling thread's CPU time, and leaf functions that burn a known
 * amount of it (the truth the tests compare the profile with). */
#ifndef OXPROF_TEST_CPU_LEAF_H
#define OXPROF_TEST_CPU_LEAF_H

#include <time.h>

static long long thread_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Keeps the leaves' arithmetic from being optimized away. */
volatile double leaf_sink;

/* A leaf that spins until this thread has used `ns` of CPU; returns what it used. */
#define LEAF(name)                                                          \
    __attribute__((noinline)) long long name(long long ns) {               \
        long long start = thread_cpu(), used = 0;                          \
        double x = 1.0;                                                    \
        while (used < ns) {                                                \
            for (int i = 0; i < 20000; i++) x = x * 1.0000001 + 0.5 / x;   \
            used = thread_cpu() - start;                                   \
        }                                                                  \
        leaf_sink = x;                                                     \
        return used;                                                       \
    }

#endif
