/*
 * What a timer signal costs a thread on this machine, apart from any work in
 * the handler: the kernel's (and, in a VM, the hypervisor's) side of the
 * sampling engines.
 *
 * Two threads run a fixed amount of arithmetic, optionally passing a byte
 * back and forth through pipes after every step (a context switch each
 * time). Each trial runs the same work five ways, in rotating order:
 *   plain         no timer;
 *   perf SIGPROF  a perf_events cpu-clock counter per thread, overflow
 *                 signal (O_ASYNC + F_SETSIG SIGPROF) to that thread
 *                 (oxprof's `cpu` engine on kernels before 5.13);
 *   perf SIGTRAP  the same counter with the `sigtrap` attribute (Linux
 *                 5.13+; oxprof's `cpu` engine there);
 *   perf silent   the same counter with no signal at all: what its timer
 *                 interrupts alone cost;
 *   timer_create  a CLOCK_THREAD_CPUTIME_ID timer per thread
 *                 (oxprof's `ctimer` engine).
 * The handler only counts. Prints the median wall ratio of each timed way
 * to the plain run of the same trial, with the quartiles, and what one
 * signal costs from that.
 *
 *   gcc -O2 -o /tmp/signal_cost bench/signal_cost.c -lpthread
 *   /tmp/signal_cost [STEPS [PINGPONG [TRIALS [INTERVAL_NS]]]]
 *   /tmp/signal_cost 40000 0 15 1000000    # compute only, 1 ms
 *   /tmp/signal_cost 20000 1 21 10000000   # with context switches, 10 ms
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_TRIALS 99
enum { PLAIN, PERF, PERF_TRAP, PERF_SILENT, CTIMER, MODES };
static const char *names[MODES] = {"plain", "perf SIGPROF", "perf SIGTRAP", "perf silent", "timer_create"};

static int mode, pingpong;
static long steps = 40000, interval_ns = 10000000;
static volatile long sink;
static long signals[MODES];
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread long my_signals;
static int ping[2], pong[2];

static void on_signal(int s) { (void)s; my_signals++; }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) { perror(what); exit(1); }

/* Arms this thread's timer; returns what to tear down (fd or timer). */
static void arm(int *fd, timer_t *timer) {
    pid_t tid = syscall(SYS_gettid);
    if (mode == PERF || mode == PERF_TRAP || mode == PERF_SILENT) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.type = PERF_TYPE_SOFTWARE;
        a.size = sizeof a;
        a.config = PERF_COUNT_SW_CPU_CLOCK;
        a.sample_period = interval_ns;
        a.disabled = 1;
        a.exclude_hv = 1;
        if (mode == PERF) a.wakeup_events = 1;
        if (mode == PERF_TRAP) {
            a.sigtrap = 1;
            a.remove_on_exec = 1;
        }
        *fd = syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (*fd < 0) die(mode == PERF_TRAP ? "perf_event_open with sigtrap (Linux 5.13+)" : "perf_event_open (try perf_event_paranoid <= 2)");
        struct f_owner_ex owner = {F_OWNER_TID, tid};
        if (mode == PERF && (fcntl(*fd, F_SETOWN_EX, &owner) || fcntl(*fd, F_SETSIG, SIGPROF) || fcntl(*fd, F_SETFL, O_ASYNC))) die("fcntl");
        if (ioctl(*fd, PERF_EVENT_IOC_ENABLE, 0)) die("PERF_EVENT_IOC_ENABLE");
    } else if (mode == CTIMER) {
        struct sigevent ev;
        memset(&ev, 0, sizeof ev);
        ev.sigev_notify = SIGEV_THREAD_ID;
        ev.sigev_signo = SIGPROF;
        ev._sigev_un._tid = tid;
        if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, timer)) die("timer_create");
        struct itimerspec its = {{interval_ns / 1000000000, interval_ns % 1000000000}, {interval_ns / 1000000000, interval_ns % 1000000000}};
        if (timer_settime(*timer, 0, &its, NULL)) die("timer_settime");
    }
}

static void disarm(int fd, timer_t timer) {
    if (fd >= 0) close(fd);
    if (mode == CTIMER) timer_delete(timer);
}

static void *worker(void *arg) {
    long id = (long)arg, x = 0;
    int fd = -1;
    timer_t timer = 0;
    char c = 0;
    my_signals = 0;
    arm(&fd, &timer);
    for (long i = 0; i < steps; i++) {
        for (int k = 0; k < 20000; k++) x = x * 6364136223846793005L + k;
        if (pingpong) {
            if (id == 0) {
                if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) die("pipe");
            } else {
                if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1) die("pipe");
            }
        }
    }
    disarm(fd, timer);
    sink += x;
    pthread_mutex_lock(&count_lock);
    signals[mode] += my_signals;
    pthread_mutex_unlock(&count_lock);
    return NULL;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int trials = 15;
    if (argc > 1) steps = atol(argv[1]);
    if (argc > 2) pingpong = atoi(argv[2]);
    if (argc > 3) trials = atoi(argv[3]);
    if (argc > 4) interval_ns = atol(argv[4]);
    if (steps <= 0 || trials < 3 || trials > MAX_TRIALS || interval_ns <= 0) {
        fprintf(stderr, "usage: %s [STEPS>0 [PINGPONG 0|1 [TRIALS 3-%d [INTERVAL_NS>0]]]]\n", argv[0], MAX_TRIALS);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    sigaction(SIGTRAP, &sa, NULL);
    if (pipe(ping) || pipe(pong)) die("pipe");
    static double t[MODES][MAX_TRIALS];
    for (int r = 0; r < trials; r++) {
        for (int i = 0; i < MODES; i++) {
            mode = (i + r) % MODES;
            double start = now();
            pthread_t a, b;
            pthread_create(&a, NULL, worker, (void *)0);
            pthread_create(&b, NULL, worker, (void *)1);
            pthread_join(a, NULL);
            pthread_join(b, NULL);
            t[mode][r] = now() - start;
        }
    }
    double plain = 0;
    for (int r = 0; r < trials; r++) plain += t[PLAIN][r] / trials;
    printf("%d trials, 2 threads, %ld steps%s, interval %.3f ms; plain run %.3f s\n", trials, steps,
           pingpong ? " with a context switch each" : "", interval_ns / 1e6, plain);
    for (int m = PERF; m < MODES; m++) {
        double ratio[MAX_TRIALS];
        for (int r = 0; r < trials; r++) ratio[r] = t[m][r] / t[PLAIN][r];
        qsort(ratio, trials, sizeof ratio[0], by_value);
        double median = ratio[trials / 2];
        double per_thread = (double)signals[m] / trials / 2;
        const char *what = "signal";
        if (m == PERF_SILENT) {
            /* No signals to count: one timer interrupt per interval of each
             * thread's CPU time, which (one thread per core) is the run's. */
            per_thread = plain * 1e9 / interval_ns;
            what = "timer interrupt";
        }
        printf("%-15s median ratio %.4f (quartiles %.4f-%.4f), %.0f %ss per thread and run, ~%.1f us per %s\n", names[m],
               median, ratio[trials / 4], ratio[3 * trials / 4], per_thread, what,
               per_thread > 0 ? (median - 1) * plain / per_thread * 1e6 : 0.0, what);
    }
    return 0;
}
