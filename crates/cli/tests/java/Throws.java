import java.util.concurrent.atomic.AtomicLong;

/**
 * Exception-heavy work for the stack walk tests: three threads throw and
 * catch through up to eight frames, with exceptions that skip their stack
 * trace, ones that fill it in, and ones the JDK throws
 * (NumberFormatException), each until it has spent a number of seconds of
 * CPU time (first argument; see CpuBudget). Prints how many it caught.
 */
public class Throws {
    static final AtomicLong caught = new AtomicLong();
    static class Fast extends RuntimeException {
        Fast() { super(null, null, false, false); }
    }
    static int depth(int n, int mode) {
        if (n == 0) {
            switch (mode) {
                case 0: throw new Fast();
                case 1: throw new IllegalStateException("x");
                default: return Integer.parseInt("no" + mode);
            }
        }
        return depth(n - 1, mode) + 1;
    }
    static long work(int mode, String seconds) {
        CpuBudget budget = CpuBudget.of(seconds);
        long sum = 0;
        while (budget.more()) {
            for (int i = 0; i < 100; i++) {
                try {
                    sum += depth(i % 8, mode);
                } catch (RuntimeException e) {
                    sum += e.getClass().getName().length();
                    caught.incrementAndGet();
                }
            }
        }
        return sum;
    }
    public static void main(String[] a) throws Exception {
        Thread[] ts = new Thread[3];
        for (int m = 0; m < 3; m++) {
            final int mode = m;
            ts[m] = new Thread(() -> System.out.println("sum " + work(mode, a[0])), "thrower-" + m);
            ts[m].start();
        }
        for (Thread t : ts) t.join();
        System.out.println("TRUTH caught=" + caught.get());
    }
}
