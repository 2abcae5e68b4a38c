import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import one.oxprof.OxProfiler;

/**
 * A service profiled several times in its life, as an operator does with
 * `oxprof attach PID start` ... `stop` (here through the Java API, the same
 * commands): a pool of reused worker threads serves requests, each under a
 * context label of its own (`request=rK-I`). Each recording sees fewer
 * label sets than the agent's limit, all of them together more.
 *
 * Arguments: OUT_DIR RECORDINGS REQUESTS_PER_RECORDING. Per recording
 * K: starts `event=cpu,interval=1ms,file=OUT_DIR/rec-K.collapsed`, serves
 * REQUESTS (a context each, no work), then 8 requests that burn 25 ms of
 * their thread's CPU each, in burnEven or burnOdd by the parity of I,
 * stops, and prints `burned rec=K cpu_ns=N` and `labels K <labelStats>`.
 */
public class ServiceSweepRecordings {
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

    static long serve(int rec, int i, boolean burn) {
        try (OxProfiler.Context c = OxProfiler.context("request", "r" + rec + "-" + i)) {
            if (!burn) {
                return 0;
            }
            long t0 = MX.getCurrentThreadCpuTime();
            if (i % 2 == 0) {
                burnEven(25_000_000L);
            } else {
                burnOdd(25_000_000L);
            }
            return MX.getCurrentThreadCpuTime() - t0;
        }
    }

    public static void main(String[] args) throws Exception {
        String out = args[0];
        int recordings = Integer.parseInt(args[1]);
        int requests = Integer.parseInt(args[2]);
        OxProfiler p = OxProfiler.getInstance();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        for (int rec = 0; rec < recordings; rec++) {
            p.execute("start,event=cpu,interval=1ms,file=" + out + "/rec-" + rec + ".collapsed");
            List<Future<Long>> done = new ArrayList<>();
            for (int i = 0; i < requests; i++) {
                final int r = rec, n = i;
                done.add(pool.submit(() -> serve(r, n, false)));
            }
            for (Future<Long> f : done) {
                f.get();
            }
            done.clear();
            for (int i = requests; i < requests + 8; i++) {
                final int r = rec, n = i;
                done.add(pool.submit(() -> serve(r, n, true)));
            }
            long cpu = 0;
            for (Future<Long> f : done) {
                cpu += f.get();
            }
            p.stop();
            System.out.println("burned rec=" + rec + " cpu_ns=" + cpu);
            System.out.println("labels " + rec + " " + OxProfiler.labelStats());
        }
        pool.shutdown();
    }
}
