// What a perf_events CPU counter adds to each context switch of the thread
// that carries it.
//
// Two threads pinned to one CPU hand a byte back and forth through two
// pipes, so every hand-over is a context switch. With a cpu-clock counter
// open on each thread (as oxprof's perf_events engine opens one per
// thread), the kernel stops the counter's hrtimer when the thread leaves
// the CPU and starts it when it comes back. The period is long (10 ms) and
// nothing is signalled: only the switch cost is measured.
//
//   gcc -O2 -o /tmp/switch_cost bench/switch_cost.c -lpthread
//   /tmp/switch_cost [ROUND_TRIPS [TRIALS]]
//
// Prints the median time per round trip (two switches) without and with
// the counters, over TRIALS alternating trials, and the added cost per
// switch.
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int ping[2], pong[2];
static long trips;
static int with_counter;

static int open_counter(void) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.sample_period = 10000000;
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd < 0) {
        perror("perf_event_open (cpu-clock)");
        exit(1);
    }
    return fd;
}

static void *player(void *arg) {
    long first = (long)arg;
    int fd = with_counter ? open_counter() : -1;
    char c = 0;
    for (long i = 0; i < trips; i++) {
        if (first) {
            if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) exit(1);
        } else {
            if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1) exit(1);
        }
    }
    if (fd >= 0) close(fd);
    return NULL;
}

static double trial(int counter) {
    with_counter = counter;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, player, (void *)(long)(i == 0));
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / trips;
}

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    trips = argc > 1 ? atol(argv[1]) : 100000;
    int trials = argc > 2 ? atoi(argv[2]) : 11;
    if (trips < 1 || trials < 1 || trials > 100) {
        fprintf(stderr, "usage: switch_cost [ROUND_TRIPS>0 [TRIALS 1..100]]\n");
        return 2;
    }
    if (pipe(ping) || pipe(pong)) {
        perror("pipe");
        return 1;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    if (sched_setaffinity(0, sizeof one, &one)) {
        perror("sched_setaffinity");
        return 1;
    }
    double plain[100], counted[100];
    for (int i = 0; i < trials; i++) {
        plain[i] = trial(0);
        counted[i] = trial(1);
    }
    qsort(plain, trials, sizeof(double), cmp);
    qsort(counted, trials, sizeof(double), cmp);
    double p = plain[trials / 2], c = counted[trials / 2];
    printf("round trip (2 switches): %.0f ns plain, %.0f ns with a cpu-clock counter per thread\n", p, c);
    printf("added per switch: %.0f ns\n", (c - p) / 2);
    return 0;
}
