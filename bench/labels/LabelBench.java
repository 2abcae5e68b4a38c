import one.oxprof.OxProfiler;

/**
 * The cost of setting and clearing context labels (OxProfiler.context), per
 * set/clear pair, with a recording running ("on") and without ("off"), in
 * ns of the thread's CPU time above an empty loop doing the same work
 * otherwise.
 *
 * Usage: java -Doxprof.library=... -cp .:oxprof.jar LabelBench [ROUNDS] [ITERATIONS]
 *
 * Each round measures every case once, in turn, after a warm-up of five
 * rounds; a case's figure is the median over the rounds. "on" rounds run
 * with `start,event=cpu,interval=10ms` (a CPU recording written to
 * /dev/null), "off" rounds with the agent loaded and idle; they alternate,
 * so drift on a shared machine hits both alike.
 */
public class LabelBench {
    static long sink;

    interface Case {
        void run(int n);
    }

    static void empty(int n) {
        for (int i = 0; i < n; i++) {
            sink += i;
        }
    }

    static void oneLabel(int n) {
        for (int i = 0; i < n; i++) {
            try (OxProfiler.Context c = OxProfiler.context("endpoint", "GET /orders")) {
                sink += i;
            }
        }
    }

    static void twoLabels(int n) {
        for (int i = 0; i < n; i++) {
            try (OxProfiler.Context c = OxProfiler.context("endpoint", "GET /orders", "tenant", "acme")) {
                sink += i;
            }
        }
    }

    static final String[] VALUES = {"GET /orders", "POST /orders", "GET /items", "GET /users", "PUT /cart", "GET /cart", "DELETE /cart", "GET /health"};

    static void eightValues(int n) {
        for (int i = 0; i < n; i++) {
            try (OxProfiler.Context c = OxProfiler.context("endpoint", VALUES[i & 7])) {
                sink += i;
            }
        }
    }

    static void nested(int n) {
        for (int i = 0; i < n; i++) {
            try (OxProfiler.Context outer = OxProfiler.context("endpoint", "GET /orders")) {
                try (OxProfiler.Context inner = OxProfiler.context("step", "db")) {
                    sink += i;
                }
            }
        }
    }

    static final java.lang.management.ThreadMXBean MX = java.lang.management.ManagementFactory.getThreadMXBean();

    /** The thread's CPU time per iteration (not wall time: on a shared machine the thread is preempted). */
    static double nsPer(Case c, int n) {
        long t0 = MX.getCurrentThreadCpuTime();
        c.run(n);
        return (MX.getCurrentThreadCpuTime() - t0) / (double) n;
    }

    static double median(double[] v) {
        double[] s = v.clone();
        java.util.Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 20;
        int n = args.length > 1 ? Integer.parseInt(args[1]) : 5_000_000;
        OxProfiler p = OxProfiler.getInstance();
        String[] names = {"empty loop", "1 label", "2 labels", "1 label, 8 values", "nested (2 contexts)"};
        Case[] cases = {LabelBench::empty, LabelBench::oneLabel, LabelBench::twoLabels, LabelBench::eightValues, LabelBench::nested};
        // Contexts per iteration: a set/clear pair each.
        int[] pairs = {1, 1, 1, 1, 2};
        double[][][] ns = new double[2][cases.length][rounds];
        for (int r = -5; r < rounds; r++) {
            for (int on = 0; on < 2; on++) {
                if (on == 1) {
                    p.execute("start,event=cpu,interval=10ms,file=/dev/null,collapsed");
                }
                for (int c = 0; c < cases.length; c++) {
                    double v = nsPer(cases[c], n);
                    if (r >= 0) {
                        ns[on][c][r] = v;
                    }
                }
                if (on == 1) {
                    p.stop();
                }
            }
        }
        System.out.printf("%s, %d rounds of %d iterations (median CPU ns per iteration; per set/clear pair above the empty loop)%n",
                System.getProperty("java.vm.version"), rounds, n);
        System.out.printf("%-22s %12s %12s %14s %14s%n", "case", "off ns/iter", "on ns/iter", "off ns/pair", "on ns/pair");
        double[] base = {median(ns[0][0]), median(ns[1][0])};
        for (int c = 0; c < cases.length; c++) {
            double off = median(ns[0][c]), on = median(ns[1][c]);
            String offPair = c == 0 ? "" : String.format("%.1f", (off - base[0]) / pairs[c]);
            String onPair = c == 0 ? "" : String.format("%.1f", (on - base[1]) / pairs[c]);
            System.out.printf("%-22s %12.2f %12.2f %14s %14s%n", names[c], off, on, offPair, onPair);
        }
        System.out.println("STATS " + OxProfiler.labelStats() + " sink=" + (sink & 1));
    }
}
