import java.util.concurrent.locks.ReentrantLock;

/**
 * Two ReentrantLocks held most of the time by holder threads (20 ms held,
 * then a short pause): A by "holder-A1" and "holder-A2" in turns, B by
 * "holder-B" alone; one waiter per lock ("waiter-A", "waiter-B") takes and
 * drops it every millisecond. Before each lock() the waiter notes who holds
 * the lock (the lock's own getOwner()) and then measures its wait, so it
 * knows how much of its waiting time each thread held the lock for.
 * The same for a Java monitor M (synchronized), held by "holder-M1" and
 * "holder-M2" in turns and waited for by "waiter-M": each holder publishes
 * itself in a volatile field while it is inside the monitor. M's holders
 * take strict turns (a lock that lets one of them barge in every time
 * would leave the other no share to check). A's do not: on JDK 11, A1 then
 * holds A nearly always, and on JDK 21 a waiter woken when A1 lets go
 * often finds A2 has barged in, so that its one wait as the program sees
 * it is two parks, each with its own owner.
 * Prints: TRUTH waitA=<ns> waitA_by_holder-A1=<ns> waitA_by_holder-A2=<ns>
 * waitB=<ns> waitB_by_holder-B=<ns> waitM=<ns> waitM_by_holder-M1=<ns>
 * waitM_by_holder-M2=<ns>
 */
public class LockOwners {
    static final class OwnedLock extends ReentrantLock {
        Thread owner() {
            return getOwner();
        }
    }

    static final OwnedLock A = new OwnedLock();
    static final OwnedLock B = new OwnedLock();
    static final class Guard {}
    static final Guard M = new Guard();
    static volatile String mOwner;
    static volatile boolean done;
    /** Whose turn it is among M's two holders: 0 or 1. */
    static volatile int turnM;

    static void awaitTurn(int me) {
        while (!done && turnM != me) {
            sleepNanos(50_000L);
        }
    }

    static void holdM(int me) {
        String name = Thread.currentThread().getName();
        while (!done) {
            awaitTurn(me);
            synchronized (M) {
                mOwner = name;
                sleepNanos(20_000_000L);
                mOwner = null;
                turnM = 1 - me;
            }
            sleepNanos(300_000L);
        }
    }

    /** As waitOn, for the monitor. */
    static long[] waitOnM() {
        long all = 0, by1 = 0, by2 = 0;
        while (!done) {
            String name = mOwner;
            long t0 = System.nanoTime();
            long waited;
            synchronized (M) {
                waited = System.nanoTime() - t0;
            }
            all += waited;
            if ("holder-M1".equals(name)) by1 += waited;
            if ("holder-M2".equals(name)) by2 += waited;
            sleepNanos(1_000_000L);
        }
        return new long[] {all, by1, by2};
    }

    static void hold(OwnedLock lock) {
        while (!done) {
            lock.lock();
            try {
                sleepNanos(20_000_000L);
            } finally {
                lock.unlock();
            }
            sleepNanos(300_000L);
        }
    }

    static long[] waitOnA() {
        return waitOn(A, "holder-A1", "holder-A2");
    }

    static long[] waitOnB() {
        return waitOn(B, "holder-B", "none");
    }

    /** Returns {ns waited in all, ns waited while h1 held it at the start, the same for h2}. */
    static long[] waitOn(OwnedLock lock, String h1, String h2) {
        long all = 0, by1 = 0, by2 = 0;
        while (!done) {
            Thread owner = lock.owner();
            long t0 = System.nanoTime();
            lock.lock();
            long waited = System.nanoTime() - t0;
            lock.unlock();
            all += waited;
            String name = owner == null ? "" : owner.getName();
            if (name.equals(h1)) by1 += waited;
            if (name.equals(h2)) by2 += waited;
            sleepNanos(1_000_000L);
        }
        return new long[] {all, by1, by2};
    }

    static void sleepNanos(long ns) {
        try {
            Thread.sleep(ns / 1_000_000L, (int) (ns % 1_000_000L));
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        long[][] result = new long[3][];
        Thread[] threads = {
            new Thread(() -> hold(A), "holder-A1"),
            new Thread(() -> hold(A), "holder-A2"),
            new Thread(() -> hold(B), "holder-B"),
            new Thread(() -> result[0] = waitOnA(), "waiter-A"),
            new Thread(() -> result[1] = waitOnB(), "waiter-B"),
            new Thread(() -> holdM(0), "holder-M1"),
            new Thread(() -> holdM(1), "holder-M2"),
            new Thread(() -> result[2] = waitOnM(), "waiter-M"),
        };
        for (Thread t : threads) t.start();
        Thread.sleep((long) (seconds * 1000));
        done = true;
        for (Thread t : threads) t.join();
        System.out.println("TRUTH waitA=" + result[0][0] + " waitA_by_holder-A1=" + result[0][1]
            + " waitA_by_holder-A2=" + result[0][2] + " waitB=" + result[1][0] + " waitB_by_holder-B=" + result[1][1]
            + " waitM=" + result[2][0] + " waitM_by_holder-M1=" + result[2][1] + " waitM_by_holder-M2=" + result[2][2]);
    }
}
