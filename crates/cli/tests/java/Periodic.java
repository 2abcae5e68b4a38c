import java.util.concurrent.locks.LockSupport;

/**
 * Threads that work in a fixed rhythm: each is busy for `busy` ms at the
 * start of every 20 ms, then parked until the next (thread k starts k times
 * `shift` ms later). Arguments: threads, busy ms, run ms, shift ms. A sampler that looks at a thread at the same point of every
 * cycle (50 ms is 2.5 cycles) sees it busy far more or less often than it
 * is. Prints each thread's share of its time spent busy, measured with
 * nanoTime around the busy phases.
 */
public class Periodic {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        long busy = Long.parseLong(args[1]) * 1_000_000L, period = 20_000_000L;
        long duration = Long.parseLong(args[2]) * 1_000_000L;
        Thread[] ts = new Thread[n];
        long[] busyNs = new long[n], aliveNs = new long[n];
        long t0 = System.nanoTime();
        for (int k = 0; k < n; k++) {
            final int id = k;
            ts[k] = new Thread(() -> {
                long start = System.nanoTime(), next = t0 + id * Long.parseLong(args[3]) * 1_000_000L, spent = 0;
                while (System.nanoTime() - t0 < duration) {
                    long now = System.nanoTime();
                    while (next > now) {
                        LockSupport.parkNanos(next - now);
                        now = System.nanoTime();
                    }
                    long b = System.nanoTime(), x = 0;
                    while (System.nanoTime() - b < busy) x += x * 31 + 7;
                    spent += System.nanoTime() - b;
                    sink += x;
                    next += period;
                    // A thread that fell a cycle behind (a busy machine)
                    // skips ahead rather than running flat out to catch up.
                    long late = System.nanoTime() - next;
                    if (late > period) next += late / period * period;
                }
                busyNs[id] = spent;
                aliveNs[id] = System.nanoTime() - start;
            }, "periodic-" + k);
            ts[k].start();
        }
        for (Thread t : ts) t.join();
        long b = 0, a = 0;
        for (int k = 0; k < n; k++) {
            b += busyNs[k];
            a += aliveNs[k];
        }
        System.out.println("TRUTH busy_share=" + (double) b / a);
    }
}
