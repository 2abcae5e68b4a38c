import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * Two threads burn CPU in two methods for different amounts of CPU time and
 * print the truth measured with ThreadMXBean: "TRUTH burnA=<ns> burnB=<ns>".
 */
public class Ratio {
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();
    static volatile long sink;
    static volatile long cpuA, cpuB;

    static long mix(long x) {
        x ^= x << 13; x ^= x >>> 7; x ^= x << 17;
        return x;
    }

    static long burnA(long targetNs) {
        long start = MX.getCurrentThreadCpuTime(), x = 1;
        while (MX.getCurrentThreadCpuTime() - start < targetNs) {
            for (int i = 0; i < 20_000; i++) x = mix(x + i);
        }
        cpuA = MX.getCurrentThreadCpuTime() - start;
        return x;
    }

    static long burnB(long targetNs) {
        long start = MX.getCurrentThreadCpuTime(), x = 2;
        while (MX.getCurrentThreadCpuTime() - start < targetNs) {
            for (int i = 0; i < 20_000; i++) x = mix(x + i);
        }
        cpuB = MX.getCurrentThreadCpuTime() - start;
        return x;
    }

    public static void main(String[] args) throws Exception {
        long a = (long) (Double.parseDouble(args[0]) * 1e9), b = (long) (Double.parseDouble(args[1]) * 1e9);
        Thread ta = new Thread(() -> sink += burnA(a), "burner-a");
        Thread tb = new Thread(() -> sink += burnB(b), "burner-b");
        ta.start(); tb.start();
        ta.join(); tb.join();
        System.out.println("TRUTH burnA=" + cpuA + " burnB=" + cpuB);
    }
}
