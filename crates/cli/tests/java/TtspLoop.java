import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A thread spends its time in a long counted loop (compiled without
 * safepoint polls when the JVM runs with -XX:-UseCountedLoopSafepoints
 * -XX:LoopStripMiningIter=0), two others burn CPU in short calls that
 * reach a safepoint within microseconds, and the main thread asks for a
 * safepoint every 100 ms (Thread.getAllStackTraces), timing each request.
 * Args: seconds to run. Prints "ready" once the loop is compiled, then at
 * the end "truth requests=N request_ns=SUM max_request_ns=MAX loops=L".
 */
public class TtspLoop {
    static volatile long sink;

    static long spinLoop(int n, long seed) {
        long x = seed;
        for (int i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            x += i;
        }
        return x;
    }

    /** The same work in short calls: the caller's loop polls between them. */
    static long shortWork(int n, long seed) {
        long x = seed;
        for (int i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            x += i;
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        // Warm up and compile spinLoop, then size one call to ~40 ms.
        int n = 1_000_000;
        for (int k = 0; k < 200; k++) sink += spinLoop(n, k);
        long t0 = System.nanoTime();
        sink += spinLoop(50_000_000, 7);
        long per50m = Math.max(1, System.nanoTime() - t0);
        final int big = (int) Math.min(Integer.MAX_VALUE - 1L, 50_000_000L * 40_000_000L / per50m);
        AtomicBoolean done = new AtomicBoolean();
        AtomicLong loops = new AtomicLong();
        Thread spinner = new Thread(() -> {
            long s = 1;
            while (!done.get()) {
                s += spinLoop(big, s);
                loops.incrementAndGet();
            }
            sink += s;
        }, "spinner");
        Thread[] busy = new Thread[2];
        for (int b = 0; b < busy.length; b++) {
            busy[b] = new Thread(() -> {
                long s = 1;
                while (!done.get()) {
                    s += shortWork(10_000, s);
                }
                sink += s;
            }, "busy-" + b);
        }
        spinner.start();
        for (Thread b : busy) b.start();
        System.out.println("ready");
        System.out.flush();
        long requests = 0, sum = 0, max = 0;
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (System.nanoTime() < end) {
            Thread.sleep(100);
            long a = System.nanoTime();
            sink += Thread.getAllStackTraces().size();
            long d = System.nanoTime() - a;
            requests++;
            sum += d;
            max = Math.max(max, d);
        }
        done.set(true);
        spinner.join();
        for (Thread b : busy) b.join();
        System.out.println("truth n=" + big + " requests=" + requests + " request_ns=" + sum + " max_request_ns=" + max + " loops=" + loops.get());
    }
}
