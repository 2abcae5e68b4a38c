// Allocation-sampling bias benchmark (issue 23, docs/allocation-sampling-bias.md).
// Usage: java AllocBias [threads=200] [rounds=600 per thread at 200 threads]
// Each thread, per round: 200 x byte[32] at tiny(), then 8 arrays of 1..17 KiB at large().
// Truth per site: ThreadMXBean.getThreadAllocatedBytes(own id) around each batch,
// minus a calibrated per-measurement overhead (empty batch). Prints
//   TRUTH tiny=<bytes> large=<bytes> warm=<bytes> threads_all=<bytes> ...
// warm() makes each thread's first allocation (one byte[32]) before the loop, so the
// "first slow-path allocation of a thread is always sampled" effect lands on its own site.
import java.lang.management.ManagementFactory;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

public class AllocBias {
    static final com.sun.management.ThreadMXBean MX =
        (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    static final AtomicLong TINY = new AtomicLong(), LARGE = new AtomicLong(),
        WARM = new AtomicLong(), ALL = new AtomicLong(), OVERHEAD = new AtomicLong();
    static volatile Object sink;

    // getCurrentThreadAllocatedBytes() exists only from JDK 14; on 14+ this call with the
    // current thread's id does not allocate, on 11 it allocates two small long[] (calibrated out).
    static long now(long id) { return MX.getThreadAllocatedBytes(id); }

    // per-thread ring keeps the arrays reachable for a while: no escape-analysis elimination
    static void warm(Object[] ring) { ring[0] = new byte[32]; }

    static void tiny(Object[] ring) {
        for (int i = 0; i < 200; i++) ring[i & 63] = new byte[32];
    }

    static long large(Object[] ring, long seed) {
        for (int k = 0; k < 8; k++) {
            seed = seed * 6364136223846793005L + 1442695040888963407L;
            int size = 1024 + (int) ((seed >>> 33) % (16 * 1024 + 1)); // 1..17 KiB
            ring[64 + (k & 7)] = new byte[size];
        }
        return seed;
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 200;
        // same total work whatever the thread count: 200*5000 thread-rounds by default
        long totalRounds = args.length > 1 ? Long.parseLong(args[1]) : 200L * 5000;
        final int rounds = (int) (totalRounds / threads);
        now(Thread.currentThread().getId());
        Thread[] ts = new Thread[threads];
        final CountDownLatch go = new CountDownLatch(1);
        long t0 = System.nanoTime();
        for (int t = 0; t < threads; t++) {
            final long seed0 = 0x9E3779B97F4A7C15L * (t + 1);
            ts[t] = new Thread(() -> {
                Object[] ring = new Object[72];
                final long id = Thread.currentThread().getId();
                long start = now(id);
                long a = now(id);
                warm(ring);
                long b = now(id);
                // calibrate: cost of one measurement (empty batch), min over 100 tries
                long ov = Long.MAX_VALUE;
                for (int i = 0; i < 100; i++) {
                    long x = now(id);
                    long y = now(id);
                    ov = Math.min(ov, y - x);
                }
                try { go.await(); } catch (InterruptedException e) { throw new RuntimeException(e); }
                long tiny = 0, large = 0, seed = seed0;
                for (int r = 0; r < rounds; r++) {
                    long p = now(id);
                    tiny(ring);
                    long q = now(id);
                    seed = large(ring, seed);
                    long s = now(id);
                    tiny += q - p - ov;
                    large += s - q - ov;
                }
                sink = ring;
                long end = now(id);
                TINY.addAndGet(tiny); LARGE.addAndGet(large);
                WARM.addAndGet(b - a - ov); ALL.addAndGet(end - start);
                OVERHEAD.addAndGet(ov);
            }, "ab-" + t);
        }
        for (Thread t : ts) t.start();
        go.countDown(); // all threads allocate at the same time
        for (Thread t : ts) t.join();
        long ms = (System.nanoTime() - t0) / 1_000_000;
        System.out.println("TRUTH tiny=" + TINY.get() + " large=" + LARGE.get() + " warm=" + WARM.get()
            + " threads_all=" + ALL.get() + " overhead_per_call_sum=" + OVERHEAD.get()
            + " threads=" + threads + " rounds=" + rounds + " ms=" + ms);
    }
}
