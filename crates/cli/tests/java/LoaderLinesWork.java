import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * The work LoaderLines loads through its own class loader: `spin` until
 * this thread has used 1.5 s of CPU (read every 50 rounds of about 1 ms; a
 * class of another loader cannot use the tests' package-private CpuBudget).
 */
public class LoaderLinesWork implements Runnable {
    static volatile double sink;

    public void run() {
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long until = mx.getCurrentThreadCpuTime() + 1_500_000_000L;
        long deadline = System.nanoTime() + 300_000_000_000L;
        while (mx.getCurrentThreadCpuTime() < until && System.nanoTime() < deadline) {
            for (int r = 0; r < 50; r++) {
                sink += spin(200_000);
            }
        }
    }

    static double spin(int n) {
        double x = 0;
        for (int i = 0; i < n; i++) {
            x += Math.sqrt(i + x);
        }
        return x;
    }
}
