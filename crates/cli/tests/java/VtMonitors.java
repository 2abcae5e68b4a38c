import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

// Virtual threads (or, for a control, platform threads) contending for one
// `synchronized` monitor, each summing the time it waited to enter it
// (nanoTime before the synchronized block to nanoTime as its first
// statement), for the lock profiling tests of virtual threads. The holder
// spins on even rounds and sleeps on odd ones: on JDK 24+ (JEP 491) a
// virtual thread blocked on a monitor unmounts, so its wait may begin on
// one carrier and end on another; a spinning holder keeps its own carrier
// busy, a sleeping one unmounts too. On JDK 21 a blocked virtual thread
// stays pinned to its carrier.
//
// Usage: java VtMonitors virtual|platform THREADS ROUNDS HOLD_MS
// (virtual threads need JDK 21+; they are started through reflection so
// the program compiles with --release 11). Prints at the end:
//   TRUTH monitor_wait=<ns> acquired=<n> long_waits=<n waits over 1 ms>
public class VtMonitors {
    static final Object MONITOR = new Object();
    static final AtomicLong WAITED = new AtomicLong(), ACQUIRED = new AtomicLong(), LONG_WAITS = new AtomicLong();
    static volatile double sink;

    static void hold(boolean sleep, long holdNs) {
        if (sleep) {
            try { Thread.sleep(holdNs / 1_000_000, (int) (holdNs % 1_000_000)); } catch (InterruptedException e) { throw new RuntimeException(e); }
        } else {
            long end = System.nanoTime() + holdNs;
            while (System.nanoTime() < end) sink += Math.sqrt(end);
        }
    }

    /** One entry; returns the nanoseconds waited to get in. */
    static long monitorSite(boolean sleep, long holdNs) {
        long before = System.nanoTime();
        synchronized (MONITOR) {
            long waited = System.nanoTime() - before;
            hold(sleep, holdNs);
            return waited;
        }
    }

    public static void main(String[] args) throws Exception {
        boolean virtual = args[0].equals("virtual");
        int threads = Integer.parseInt(args[1]);
        final int rounds = Integer.parseInt(args[2]);
        final long holdNs = (long) (Double.parseDouble(args[3]) * 1e6);
        Runnable body = () -> {
            long waited = 0, longWaits = 0;
            for (int r = 0; r < rounds; r++) {
                long w = monitorSite(r % 2 == 1, holdNs);
                waited += w;
                if (w > 1_000_000) longWaits++;
                hold(false, holdNs / 10); // a little work outside
            }
            WAITED.addAndGet(waited);
            ACQUIRED.addAndGet(rounds);
            LONG_WAITS.addAndGet(longWaits);
        };
        List<Thread> ts = new ArrayList<>();
        Method ofVirtual = virtual ? Thread.class.getMethod("ofVirtual") : null;
        Method start = virtual ? Class.forName("java.lang.Thread$Builder").getMethod("start", Runnable.class) : null;
        for (int i = 0; i < threads; i++) {
            Thread t;
            if (virtual) {
                t = (Thread) start.invoke(ofVirtual.invoke(null), body);
            } else {
                t = new Thread(body, "platform-" + i);
                t.start();
            }
            ts.add(t);
        }
        for (Thread t : ts) t.join();
        System.out.println("TRUTH monitor_wait=" + WAITED.get() + " acquired=" + ACQUIRED.get() + " long_waits=" + LONG_WAITS.get());
    }
}
