import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;

import one.oxprof.OxProfiler;

/**
 * Contexts opened on virtual threads (JDK 21+; the API is called by
 * reflection so that this compiles with --release 11). They label nothing
 * (docs/labels.md) and must cost nothing per virtual thread either: prints
 * the bytes the carriers allocated per virtual thread with and without a
 * context, measured by the carriers' own counters, and a platform thread
 * burns under a label of its own.
 */
public class VtLabels {
    static volatile long sink;
    static Method ofVirtual, start;

    static Thread vthread(Runnable r) throws Exception {
        return (Thread) start.invoke(ofVirtual.invoke(null), r);
    }

    /** Bytes allocated so far by the virtual-thread scheduler's carriers. */
    static long carriersAllocated() {
        com.sun.management.ThreadMXBean tm = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long sum = 0;
        for (ThreadInfo ti : tm.dumpAllThreads(false, false)) {
            if (ti.getThreadName().startsWith("ForkJoinPool-1-worker")) {
                sum += tm.getThreadAllocatedBytes(ti.getThreadId());
            }
        }
        return sum;
    }

    static long burn(long ms) {
        long end = System.nanoTime() + ms * 1_000_000L, x = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) x += i ^ x;
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        ofVirtual = Thread.class.getMethod("ofVirtual");
        start = Class.forName("java.lang.Thread$Builder").getMethod("start", Runnable.class);
        int n = Integer.parseInt(args[0]);
        Thread p = new Thread(() -> {
            try (OxProfiler.Context c = OxProfiler.context("worker", "platform")) {
                sink = burn(500);
            }
        }, "platform-worker");
        p.start();
        p.join();
        long[] best = { Long.MAX_VALUE, Long.MAX_VALUE };
        // Warm up, then the smallest of three rounds of each (other work on
        // the carriers can only add bytes).
        for (int round = 0; round < 4; round++) {
            for (int withContext = 0; withContext < 2; withContext++) {
                final boolean ctx = withContext == 1;
                long before = carriersAllocated();
                List<Thread> ts = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    ts.add(vthread(() -> {
                        if (ctx) {
                            try (OxProfiler.Context c = OxProfiler.context("request", "r")) {
                                sink++;
                            }
                        } else {
                            sink++;
                        }
                    }));
                }
                for (Thread t : ts) t.join();
                long per = (carriersAllocated() - before) / n;
                if (round > 0) best[withContext] = Math.min(best[withContext], per);
            }
        }
        System.out.println("TRUTH plain_bytes=" + best[0] + " context_bytes=" + best[1]);
    }
}
