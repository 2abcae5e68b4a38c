// A C++ library for tests/java/NativeSweep.java to dlopen (phase
// dl:LIB:cpp): cpp_outer(ns) calls a member function template of a class in a
// namespace, which spins until this thread has used ns of CPU
// (CLOCK_THREAD_CPUTIME_ID) and returns what it used. Its frames must show
// demangled: sweep::Burner<int>::spin(long long).
#include <time.h>

namespace sweep {
static long long thread_cpu() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

volatile double sink;

template <typename T> struct Burner {
    __attribute__((noinline)) long long spin(long long ns) {
        long long start = thread_cpu(), used = 0;
        double x = 1.0;
        while (used < ns) {
            for (int i = 0; i < 20000; i++) x = x * 1.0000001 + 0.5 / x;
            used = thread_cpu() - start;
        }
        sink = x;
        return used;
    }
};

__attribute__((noinline)) long long run(long long ns) {
    Burner<int> b;
    long long r = b.spin(ns);
    sink += 1;
    return r;
}
} // namespace sweep

extern "C" long long cpp_outer(long long ns) {
    long long r = sweep::run(ns);
    sweep::sink += 1;
    return r;
}
