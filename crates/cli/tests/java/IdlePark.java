import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

// A thread parking with no blocker (LockSupport.parkNanos alone: a timed
// sleep, as idle pool threads do) beside two threads contending for a
// ReentrantLock, each holding it 30 ms, for the tests that tell parks on a
// lock from parks on nothing. Usage: java IdlePark SECONDS
public class IdlePark {
    static final ReentrantLock LOCK = new ReentrantLock();

    static void idle(long until) {
        while (System.nanoTime() < until) {
            LockSupport.parkNanos(200_000_000L);
        }
    }

    static void contend(long until) {
        while (System.nanoTime() < until) {
            LOCK.lock();
            try {
                LockSupport.parkNanos(30_000_000L);
            } finally {
                LOCK.unlock();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        final long until = System.nanoTime() + (long) (Double.parseDouble(args.length > 0 ? args[0] : "2") * 1e9);
        Thread sleeper = new Thread(() -> idle(until), "sleeper");
        Thread a = new Thread(() -> contend(until), "contender-a");
        Thread b = new Thread(() -> contend(until), "contender-b");
        sleeper.start();
        a.start();
        b.start();
        sleeper.join();
        a.join();
        b.join();
        System.out.println("done");
    }
}
