import java.lang.management.ManagementFactory;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

// Load for the wall-clock cost benchmark (bench/wall/run.py).
// Usage: java WallLoad IDLE BUSY SECONDS
//   IDLE threads park for the whole run; BUSY threads spin on arithmetic and
//   count their iterations. Prints: RESULT ops=<n> cpu_ns=<process CPU> wall_ns=<run>
public class WallLoad {
    static volatile boolean stop;
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int idle = Integer.parseInt(args[0]), busy = Integer.parseInt(args[1]);
        double seconds = Double.parseDouble(args[2]);
        for (int i = 0; i < idle; i++) {
            Thread t = new Thread(() -> { while (!stop) LockSupport.park(); }, "idle-" + i);
            t.setDaemon(true);
            t.start();
        }
        LongAdder ops = new LongAdder();
        Thread[] workers = new Thread[busy];
        for (int i = 0; i < busy; i++) {
            workers[i] = new Thread(() -> {
                long x = 1, n = 0;
                while (!stop) {
                    for (int k = 0; k < 10_000; k++) x = x * 6364136223846793005L + 1442695040888963407L;
                    n++;
                }
                ops.add(n);
                sink = x;
            }, "busy-" + i);
            workers[i].start();
        }
        com.sun.management.OperatingSystemMXBean os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        Thread.sleep(1000); // settle: threads started, code compiled
        long cpu0 = os.getProcessCpuTime(), t0 = System.nanoTime();
        ops.reset();
        Thread.sleep((long) (seconds * 1000));
        long cpu1 = os.getProcessCpuTime(), t1 = System.nanoTime();
        stop = true;
        for (Thread w : workers) w.join();
        System.out.println("RESULT ops=" + ops.sum() + " cpu_ns=" + (cpu1 - cpu0) + " wall_ns=" + (t1 - t0));
        System.exit(0);
    }
}
