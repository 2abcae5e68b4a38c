import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.function.LongSupplier;

/**
 * A budget of one thread's CPU time, for the test programs whose profiles
 * are counted: a program works until its thread has spent the budget, so it
 * gives as many samples (a CPU profiler samples CPU time) on a slow or busy
 * machine as on an idle one, only later. A thread that cannot spend the
 * budget within CAP_SECONDS of wall time makes the program exit with status
 * 125 and a line saying so, rather than end with a small profile.
 * Create and use a budget on the thread whose CPU time it counts.
 */
final class CpuBudget {
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();
    static final long CAP_SECONDS = 300;

    private final long wantNs, startCpuNs, startWallNs;
    private final boolean charged;
    private long chargedNs;

    private CpuBudget(double seconds, boolean charged) {
        this.wantNs = (long) (seconds * 1e9);
        this.charged = charged;
        this.startCpuNs = MX.getCurrentThreadCpuTime();
        this.startWallNs = System.nanoTime();
    }

    /** Everything the current thread does from now on counts. */
    static CpuBudget of(double seconds) {
        return new CpuBudget(seconds, false);
    }

    static CpuBudget of(String seconds) {
        return of(Double.parseDouble(seconds));
    }

    /** Only the work run through {@link #charge} counts. */
    static CpuBudget charged(double seconds) {
        return new CpuBudget(seconds, true);
    }

    /** Runs work and charges the CPU time the current thread spent in it. */
    long charge(LongSupplier work) {
        long t0 = MX.getCurrentThreadCpuTime();
        long r = work.getAsLong();
        chargedNs += MX.getCurrentThreadCpuTime() - t0;
        return r;
    }

    long spentNs() {
        return charged ? chargedNs : MX.getCurrentThreadCpuTime() - startCpuNs;
    }

    /** Whether the budget is not spent yet; exits the JVM (status 125) once the wall-time cap has passed. */
    boolean more() {
        long spent = spentNs();
        if (spent >= wantNs) return false;
        long wall = System.nanoTime() - startWallNs;
        if (wall > CAP_SECONDS * 1_000_000_000L) {
            System.err.printf("CpuBudget: thread %s spent only %d of %d ms of CPU time in %d s of wall time: the machine is too busy for this test%n",
                    Thread.currentThread().getName(), spent / 1_000_000, wantNs / 1_000_000, wall / 1_000_000_000L);
            System.exit(125);
        }
        return true;
    }
}
