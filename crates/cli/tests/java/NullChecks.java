/**
 * Faults the JVM handles itself, for the test that oxprof's SIGSEGV handler
 * (which catches its own checked reads) hands every other fault to the
 * JVM's: compiled code that meets a rare null (an implicit null check: a
 * SIGSEGV turned into a NullPointerException) and threads running compiled
 * loops while the main thread forces safepoints (each running thread's next
 * safepoint poll faults on the armed polling page). Runs for a number of
 * seconds (first argument) and prints how many NullPointerExceptions it
 * caught against how many nulls it passed, and the safepoints it forced.
 */
public class NullChecks {
    static final class Box {
        int v;
        Box(int v) { this.v = v; }
    }

    static int read(Box b) {
        return b.v;
    }

    static volatile boolean stop;

    public static void main(String[] a) throws Exception {
        long until = System.nanoTime() + (long) (Double.parseDouble(a[0]) * 1e9);
        long[] nulls = new long[2];
        long[] caught = new long[2];
        Thread[] ts = new Thread[2];
        for (int t = 0; t < ts.length; t++) {
            final int id = t;
            ts[t] = new Thread(() -> {
                Box one = new Box(1);
                long sum = 0;
                long i = 0;
                while (!stop) {
                    i++;
                    boolean isNull = i % 50_000 == 0;
                    if (isNull) nulls[id]++;
                    try {
                        sum += read(isNull ? null : one);
                    } catch (NullPointerException e) {
                        caught[id]++;
                    }
                }
                System.out.println("sum " + sum);
            }, "faulter-" + t);
            ts[t].start();
        }
        int gcs = 0;
        while (System.nanoTime() < until) {
            System.gc();
            gcs++;
            Thread.sleep(20);
        }
        stop = true;
        for (Thread t : ts) t.join();
        System.out.println("TRUTH nulls=" + (nulls[0] + nulls[1]) + " caught=" + (caught[0] + caught[1]) + " gcs=" + gcs);
    }
}
