import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * A budget of one thread's CPU time, for the test programs whose profiles
 * are counted: a program works until its thread has spent the budget, so it
 * gives as many samples (a CPU profiler samples CPU time) on a slow or busy
 * machine as on an idle one, only later. A thread that cannot spend the
 * budget within CAP_SECONDS of wall time makes the program exit with status
 * 125 and a line saying so, rather than end with a small profile.
 *
 * A daemon thread ("cpu-budget") reads the working thread's CPU time every
 * 20 ms; the working thread only reads a flag. A thread that reads its own
 * CPU clock often makes the kernel's CPU-time timers (oxprof's itimer and
 * ctimer engines) deliver far fewer signals on a contended CPU: measured
 * 30-70 signals instead of 300 for 1.5 s of CPU at 5 ms with a read every
 * 2 ms and three other busy processes on its core.
 */
final class CpuBudget {
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();
    static final long CAP_SECONDS = 300;

    private final long ownerId, wantNs, startCpuNs, startWallNs;
    private final String owner;
    private volatile boolean spent;

    private CpuBudget(double seconds) {
        Thread t = Thread.currentThread();
        ownerId = t.getId();
        owner = t.getName();
        wantNs = seconds >= Long.MAX_VALUE / 1e9 ? Long.MAX_VALUE : (long) (seconds * 1e9);
        startCpuNs = MX.getThreadCpuTime(ownerId);
        startWallNs = System.nanoTime();
        Thread watcher = new Thread(this::watch, "cpu-budget");
        watcher.setDaemon(true);
        watcher.start();
    }

    /** A budget of the current thread's CPU time from now on. */
    static CpuBudget of(double seconds) {
        return new CpuBudget(seconds);
    }

    static CpuBudget of(String seconds) {
        return of(Double.parseDouble(seconds));
    }

    /** No end: the thread works until the program is killed. */
    static CpuBudget forever() {
        return of(Double.POSITIVE_INFINITY);
    }

    /** The CPU time the thread has spent since the budget was made. */
    long spentNs() {
        return MX.getThreadCpuTime(ownerId) - startCpuNs;
    }

    /** Whether the budget is not spent yet (checked every 20 ms). */
    boolean more() {
        return !spent;
    }

    private void watch() {
        while (true) {
            long cpu = MX.getThreadCpuTime(ownerId);
            if (cpu < 0 || cpu - startCpuNs >= wantNs) {
                spent = true;
                return;
            }
            long wall = System.nanoTime() - startWallNs;
            if (wantNs != Long.MAX_VALUE && wall > CAP_SECONDS * 1_000_000_000L) {
                System.err.printf("CpuBudget: thread %s spent only %d of %d ms of CPU time in %d s of wall time: the machine is too busy for this test%n",
                        owner, (cpu - startCpuNs) / 1_000_000, wantNs / 1_000_000, wall / 1_000_000_000L);
                System.exit(125);
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            }
        }
    }
}
