import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.ReentrantLock;

import one.oxprof.OxProfiler;

/**
 * Context labels under every kind of sample. Modes:
 *
 * "two SECONDS": threads worker-a and worker-b, each under its own label
 * (worker=a, worker=b) for its whole life, each spending SECONDS of its CPU
 * in rounds of: burning CPU (Labelled.burn), allocating (Labelled.churn),
 * sleeping (Labelled.nap) and waiting for a lock the other holds
 * (Labelled.contend). Prints "TRUTH" with the thread ids.
 *
 * "nested SECONDS": main burns in Labelled.outerWork under
 * endpoint=GET /orders, then in Labelled.innerWork under endpoint=GET /orders
 * + step=db, then in Labelled.afterWork back under the outer context alone,
 * then in Labelled.unlabelledWork with no context; then overlapping
 * contexts closed out of order end with no labels (Labelled.afterOverlap).
 *
 * "odd SECONDS": Labelled.oddWork under a value with odd characters
 * (quotes, ;, =, comma, backslash, non-ASCII, emoji), Labelled.longWork
 * under a 10,000-character value.
 *
 * "many N [R]": N distinct values of one key (request=0..N-1), each set and
 * cleared, then R more opens of one of the last values (default 0), then
 * prints labelStats; the over-limit ones burn in Labelled.overWork.
 *
 * "bad": prints what an invalid key throws.
 */
public class Labelled {
    static volatile double sink;
    static volatile Object keep;
    static final ReentrantLock LOCK = new ReentrantLock();

    static double burn(int n) {
        double s = 0;
        for (int i = 0; i < n; i++) s += Math.sqrt(i) * Math.sin(i);
        return s;
    }

    static void churn() {
        List<byte[]> l = new ArrayList<>();
        for (int i = 0; i < 64; i++) l.add(new byte[1024]);
        keep = l;
    }

    static void nap() throws InterruptedException {
        Thread.sleep(2);
    }

    static void contend() {
        LOCK.lock();
        try {
            sink += burn(300_000);
        } finally {
            LOCK.unlock();
        }
    }

    static void worker(String which, double seconds, CountDownLatch done) {
        try (OxProfiler.Context c = OxProfiler.context("worker", which)) {
            CpuBudget budget = CpuBudget.of(seconds);
            while (budget.more()) {
                sink += burn(30_000);
                churn();
                nap();
                contend();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        done.countDown();
    }

    static void outerWork(CpuBudget b) { while (b.more()) sink += burn(50_000); }
    static void innerWork(CpuBudget b) { while (b.more()) sink += burn(50_000); }
    static void afterWork(CpuBudget b) { while (b.more()) sink += burn(50_000); }
    static void unlabelledWork(CpuBudget b) { while (b.more()) sink += burn(50_000); }
    static void afterOverlap(CpuBudget b) { while (b.more()) sink += burn(50_000); }
    static void oddWork(CpuBudget b) { while (b.more()) sink += burn(50_000); }
    static void longWork(CpuBudget b) { while (b.more()) sink += burn(50_000); }
    static void overWork(CpuBudget b) { while (b.more()) sink += burn(50_000); }

    public static void main(String[] args) throws Exception {
        // Profiling runs (started by -agentpath): labels are set.
        OxProfiler.getInstance();
        String mode = args[0];
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 1;
        if (mode.equals("two")) {
            CountDownLatch done = new CountDownLatch(2);
            Thread a = new Thread(() -> worker("a", seconds, done), "worker-a");
            Thread b = new Thread(() -> worker("b", seconds, done), "worker-b");
            a.start();
            b.start();
            done.await();
            System.out.println("TRUTH done=1");
        } else if (mode.equals("nested")) {
            try (OxProfiler.Context outer = OxProfiler.context("endpoint", "GET /orders")) {
                outerWork(CpuBudget.of(seconds));
                try (OxProfiler.Context inner = OxProfiler.context("step", "db")) {
                    innerWork(CpuBudget.of(seconds));
                }
                afterWork(CpuBudget.of(seconds));
            }
            unlabelledWork(CpuBudget.of(seconds));
            OxProfiler.Context x = OxProfiler.context("x", "1");
            OxProfiler.Context y = OxProfiler.context("y", "2");
            x.close();
            y.close();
            afterOverlap(CpuBudget.of(seconds));
        } else if (mode.equals("odd")) {
            try (OxProfiler.Context c = OxProfiler.context("odd", "a \"q\"; b=c, d\\e \u00e9 \ud83d\ude00")) {
                oddWork(CpuBudget.of(seconds));
            }
            StringBuilder sb = new StringBuilder();
            while (sb.length() < 10_000) sb.append("0123456789");
            try (OxProfiler.Context c = OxProfiler.context("long", sb.toString())) {
                longWork(CpuBudget.of(seconds));
            }
        } else if (mode.equals("many")) {
            int n = Integer.parseInt(args[1]);
            for (int i = 0; i < n; i++) {
                try (OxProfiler.Context c = OxProfiler.context("request", Integer.toString(i))) {
                    sink += burn(100);
                }
            }
            int again = args.length > 2 ? Integer.parseInt(args[2]) : 0;
            for (int i = 0; i < again; i++) {
                try (OxProfiler.Context c = OxProfiler.context("request", Integer.toString(n - 1))) {
                    sink += burn(100);
                }
            }
            System.out.println("STATS " + OxProfiler.labelStats());
            try (OxProfiler.Context c = OxProfiler.context("request", "one more")) {
                overWork(CpuBudget.of(1));
            }
            System.out.println("STATS " + OxProfiler.labelStats());
        } else if (mode.equals("bad")) {
            for (String key : new String[] {"has space", "", "oxprof", "k=v"}) {
                try (OxProfiler.Context c = OxProfiler.context(key, "v")) {
                    System.out.println("ACCEPTED " + key);
                } catch (IllegalArgumentException e) {
                    System.out.println("EXC " + e.getMessage());
                }
            }
        }
    }
}
