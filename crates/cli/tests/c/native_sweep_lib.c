/* A library for tests/java/NativeSweep.java to dlopen: PFX##_outer(ns) (exported)
 * calls the static PFX##_middle, which calls the static PFX##_leaf, which spins
 * until this thread has used ns of CPU (CLOCK_THREAD_CPUTIME_ID) and returns
 * what it used. Built several times under different prefixes: with and
 * without frame pointers, with symbols or stripped. */
#include <time.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define F(name) CAT(PFX, name)

volatile double F(_sink);

static long long thread_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

__attribute__((noinline)) static long long F(_leaf)(long long ns) {
    long long start = thread_cpu(), used = 0;
    double x = 1.0;
    while (used < ns) {
        for (int i = 0; i < 20000; i++) x = x * 1.0000001 + 0.5 / x;
        used = thread_cpu() - start;
    }
    F(_sink) = x;
    return used;
}

__attribute__((noinline)) static long long F(_middle)(long long ns) {
    long long r = F(_leaf)(ns);
    F(_sink) += 1; /* not a tail call */
    return r;
}

long long F(_outer)(long long ns) {
    long long r = F(_middle)(ns);
    F(_sink) += 1;
    return r;
}
