import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import one.oxprof.OxProfiler;

/**
 * A service that ships oxprof.jar (to label its requests) but not
 * liboxprof.so: the agent comes later, by `oxprof attach PID start`.
 *
 * Prints `ready`, serves 200 requests under context labels (no agent
 * yet: they label nothing) and prints `before <labelStats>`; waits for a
 * line on stdin (the attach happens meanwhile); then serves requests
 * `request=rI` that burn 10 ms of their thread's CPU each, in burnEven or
 * burnOdd by the parity of I, until 1.5 s of CPU were burnt under labels
 * the agent knows (or 30 s passed), and prints `after <labelStats>`, `burned
 * cpu_ns=N requests=R` and `done`, and ends at the next line on stdin (the
 * recording is stopped meanwhile).
 */
public class ServiceSweepLateAgent {
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();
    static volatile long sink;

    static long spin(long ns) {
        long end = MX.getCurrentThreadCpuTime() + ns;
        long x = 0;
        while (MX.getCurrentThreadCpuTime() < end) {
            for (int i = 0; i < 20000; i++) {
                x += (i * 31) ^ x;
            }
        }
        sink = x;
        return x;
    }

    static long burnEven(long ns) {
        return spin(ns);
    }

    static long burnOdd(long ns) {
        return spin(ns);
    }

    static long serve(int i, boolean burn) {
        try (OxProfiler.Context c = OxProfiler.context("request", "r" + i)) {
            if (!burn) {
                return 0;
            }
            long t0 = MX.getCurrentThreadCpuTime();
            if (i % 2 == 0) {
                burnEven(10_000_000L);
            } else {
                burnOdd(10_000_000L);
            }
            return MX.getCurrentThreadCpuTime() - t0;
        }
    }

    public static void main(String[] args) throws Exception {
        System.out.println("ready");
        System.out.flush();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        List<Future<Long>> done = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            final int n = i;
            done.add(pool.submit(() -> serve(n, false)));
        }
        for (Future<Long> f : done) {
            f.get();
        }
        System.out.println("before " + OxProfiler.labelStats());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        in.readLine();
        long cpu = 0;
        int i = 200;
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (System.nanoTime() < deadline) {
            boolean known = !OxProfiler.labelStats().startsWith("labels unavailable");
            done.clear();
            for (int k = 0; k < 8; k++) {
                final int n = i++;
                done.add(pool.submit(() -> serve(n, true)));
            }
            long round = 0;
            for (Future<Long> f : done) {
                round += f.get();
            }
            if (known) {
                cpu += round;
                if (cpu >= 1_500_000_000L) {
                    break;
                }
            }
        }
        System.out.println("after " + OxProfiler.labelStats());
        System.out.println("burned cpu_ns=" + cpu + " requests=" + (i - 200));
        System.out.println("done");
        System.out.flush();
        pool.shutdown();
        in.readLine();
    }
}
