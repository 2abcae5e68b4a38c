import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * Prints "ready", burns the given seconds of its main thread's CPU time in
 * CpuBurn.spin, then prints "CPU_NS <the main thread's CPU time in ns>" as
 * ThreadMXBean measured it.
 */
public class CpuBurn {
    static volatile double sink;

    static void spin() {
        double s = 0;
        for (int i = 0; i < 200_000; i++) s += Math.sqrt(i) * Math.sin(i);
        sink += s;
    }

    public static void main(String[] args) {
        System.out.println("ready");
        System.out.flush();
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long start = mx.getCurrentThreadCpuTime();
        long want = (long) (Double.parseDouble(args[0]) * 1e9);
        while (mx.getCurrentThreadCpuTime() - start < want) spin();
        System.out.println("CPU_NS " + (mx.getCurrentThreadCpuTime() - start));
    }
}
