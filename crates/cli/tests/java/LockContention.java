import java.util.concurrent.locks.ReentrantLock;

// Threads contending for a monitor and for a ReentrantLock, each summing the
// time it waited to acquire (nanoTime around the acquisition), for the lock
// profiling tests. Usage: java LockContention SECONDS [THREADS_PER_LOCK]
// Prints "ready" at once, then at the end:
//   TRUTH monitor_wait=<ns> monitor_acquired=<n> lock_wait=<ns> lock_acquired=<n>
public class LockContention {
    static final Object MONITOR = new Object();
    static final ReentrantLock LOCK = new ReentrantLock();
    static long monitorWait, monitorAcquired, lockWait, lockAcquired; // guarded by their lock

    static void hold() {
        try { Thread.sleep(1); } catch (InterruptedException e) { throw new RuntimeException(e); }
    }

    static void monitorSite() {
        long before = System.nanoTime();
        synchronized (MONITOR) {
            monitorWait += System.nanoTime() - before;
            monitorAcquired++;
            hold();
        }
    }

    static void reentrantSite() {
        long before = System.nanoTime();
        LOCK.lock();
        try {
            lockWait += System.nanoTime() - before;
            lockAcquired++;
            hold();
        } finally {
            LOCK.unlock();
        }
    }

    public static void main(String[] args) throws Exception {
        System.out.println("ready");
        System.out.flush();
        final long runNs = (long) (Double.parseDouble(args.length > 0 ? args[0] : "3") * 1e9);
        int perLock = args.length > 1 ? Integer.parseInt(args[1]) : 4;
        final long start = System.nanoTime();
        Thread[] ts = new Thread[2 * perLock];
        for (int i = 0; i < ts.length; i++) {
            final boolean monitor = i % 2 == 0;
            ts[i] = new Thread(() -> {
                while (System.nanoTime() - start < runNs) {
                    if (monitor) monitorSite(); else reentrantSite();
                }
            }, (monitor ? "monitor-" : "lock-") + i);
            ts[i].start();
        }
        for (Thread t : ts) t.join();
        System.out.println("TRUTH monitor_wait=" + monitorWait + " monitor_acquired=" + monitorAcquired
            + " lock_wait=" + lockWait + " lock_acquired=" + lockAcquired);
    }
}
