import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Threads that come and go among many idle ones, for the wall sampler:
 * IDLE daemon threads sleep for good, then WORKERS threads named
 * "churner" are started one every 100 ms, each sleeping NAP_MS in
 * WallChurn.nap and timing its own life with nanoTime. Prints
 * "TRUTH churn=<ns the churners lived, summed>".
 * Usage: WallChurn IDLE WORKERS NAP_MS
 */
public class WallChurn {
    static final AtomicLong lived = new AtomicLong();

    static void nap(long ms) throws InterruptedException {
        Thread.sleep(ms);
    }

    public static void main(String[] args) throws Exception {
        int idle = Integer.parseInt(args[0]), workers = Integer.parseInt(args[1]);
        long napMs = Long.parseLong(args[2]);
        for (int i = 0; i < idle; i++) {
            Thread t = new Thread(() -> {
                try {
                    Thread.sleep(Long.MAX_VALUE);
                } catch (InterruptedException e) {
                }
            }, "idler");
            t.setDaemon(true);
            t.start();
        }
        // Let the sampler list the idle threads first.
        Thread.sleep(500);
        List<Thread> started = new ArrayList<>();
        for (int i = 0; i < workers; i++) {
            Thread t = new Thread(() -> {
                long from = System.nanoTime();
                try {
                    nap(napMs);
                } catch (InterruptedException e) {
                }
                lived.addAndGet(System.nanoTime() - from);
            }, "churner");
            t.start();
            started.add(t);
            Thread.sleep(100);
        }
        for (Thread t : started) t.join();
        System.out.println("TRUTH churn=" + lived.get());
    }
}
