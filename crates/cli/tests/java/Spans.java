import one.oxprof.OxProfiler;

/**
 * Spans of known lengths: under endpoint=GET /orders, "fast" spans of
 * Spans.fastWork (about a millisecond each, 20 of them) and one "slow" span of
 * Spans.slowWork (CPU for SECONDS); then a "sleepy" span that sleeps 300 ms
 * in Spans.nap. Prints "TRUTH" with each kind's measured length in ns.
 */
public class Spans {
    static volatile double sink;

    static double burn(int n) {
        double s = 0;
        for (int i = 0; i < n; i++) s += Math.sqrt(i) * Math.sin(i);
        return s;
    }

    static void fastWork() {
        sink += burn(100_000);
    }

    static void slowWork(double seconds) {
        CpuBudget b = CpuBudget.of(seconds);
        while (b.more()) sink += burn(50_000);
    }

    static void nap() throws InterruptedException {
        Thread.sleep(300);
    }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        OxProfiler.getInstance();
        long slow, sleepy, fastMax = 0;
        try (OxProfiler.Context c = OxProfiler.context("endpoint", "GET /orders")) {
            for (int i = 0; i < 20; i++) {
                long t = System.nanoTime();
                try (OxProfiler.Span s = OxProfiler.span("fast " + i)) {
                    fastWork();
                }
                fastMax = Math.max(fastMax, System.nanoTime() - t);
            }
            long t = System.nanoTime();
            try (OxProfiler.Span s = OxProfiler.span("slow")) {
                slowWork(seconds);
            }
            slow = System.nanoTime() - t;
        }
        long t = System.nanoTime();
        try (OxProfiler.Span s = OxProfiler.span("sleepy")) {
            nap();
        }
        sleepy = System.nanoTime() - t;
        System.out.println("TRUTH slow=" + slow + " sleepy=" + sleepy + " fast_max=" + fastMax);
    }
}
