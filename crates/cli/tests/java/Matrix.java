import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * One program for the runtime matrix (tests/matrix.rs): CPU in Matrix.burn,
 * allocations in Matrix.allocate, contention on one monitor in
 * Matrix.contend, and sleeping, so that CPU, allocation, live, lock and wall
 * profiles all have a known site, under any collector or execution mode.
 *
 * Usage: Matrix SECONDS [virtual]: seconds of the main thread's CPU time
 * (of wall time with virtual threads). With "virtual" (JDK 21+), the work
 * runs in batches of 2,000 virtual threads (10,000 or more in all) that
 * compute, allocate and sleep, started through reflection so the program
 * still compiles for Java 11. Prints "VIRTUAL <threads started>" then.
 */
public class Matrix {
    static volatile long sink;
    static final Object LOCK = new Object();
    static final List<byte[]> kept = new ArrayList<>();

    static long burn(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) s += (i * 31L) ^ (s >>> 3);
        return s;
    }

    static void allocate() {
        byte[] b = new byte[4096];
        synchronized (kept) {
            kept.add(b);
            if (kept.size() > 2000) kept.subList(0, 1000).clear();
        }
    }

    static void contend() {
        synchronized (LOCK) {
            sink += burn(20_000);
        }
    }

    static void work() {
        sink += burn(200_000);
        for (int i = 0; i < 4; i++) allocate();
    }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        boolean virtual = args.length > 1 && args[1].equals("virtual");
        // The main thread's CPU time, or (virtual threads: the main thread
        // only starts them) the wall time.
        CpuBudget budget = virtual ? null : CpuBudget.of(seconds);
        long until = System.nanoTime() + (long) (seconds * 1e9);
        List<Thread> contenders = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
            Thread c = new Thread(() -> {
                while (true) contend();
            }, "contender-" + t);
            c.setDaemon(true);
            c.start();
            contenders.add(c);
        }
        Thread sleeper = new Thread(() -> {
            while (true) {
                try { Thread.sleep(5); } catch (InterruptedException e) { return; }
            }
        }, "sleeper");
        sleeper.setDaemon(true);
        sleeper.start();
        if (virtual) {
            Method newExecutor = java.util.concurrent.Executors.class.getMethod("newVirtualThreadPerTaskExecutor");
            long started = 0;
            while (System.nanoTime() < until || started < 10_000) {
                ExecutorService ex = (ExecutorService) newExecutor.invoke(null);
                {
                    for (int i = 0; i < 2000; i++) {
                        ex.submit(() -> {
                            work();
                            try { Thread.sleep(1); } catch (InterruptedException e) { }
                            work();
                        });
                        started++;
                    }
                    ex.shutdown();
                    ex.awaitTermination(5, TimeUnit.MINUTES);
                }
            }
            System.out.println("VIRTUAL " + started);
        } else {
            while (budget.more()) work();
        }
        System.out.println("done");
    }
}
