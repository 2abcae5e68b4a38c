import java.net.ServerSocket;
import java.util.concurrent.locks.LockSupport;

// Threads whose time off and on the CPU is known, for the wall-clock tests.
// Usage: java WallStates SECONDS
//   mixed:    cycles of burning CPU 20 ms, Thread.sleep 30 ms, Object.wait 20 ms
//             and LockSupport.parkNanos 15 ms, each phase timed with nanoTime;
//   blocked:  waits for a monitor the main thread holds for the whole run;
//   acceptor: sits in ServerSocket.accept() (native code) for the whole run.
// Prints: TRUTH run=<ns> burn=<ns> sleep=<ns> wait=<ns> park=<ns>
public class WallStates {
    static final Object HELD = new Object();
    static volatile long sink;

    static void burn(long ns) {
        long end = System.nanoTime() + ns, x = 1;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink = x;
    }

    static void sleepFor(long ms) {
        try { Thread.sleep(ms); } catch (InterruptedException e) { throw new RuntimeException(e); }
    }

    static void waitFor(Object lock, long ms) {
        synchronized (lock) {
            long end = System.nanoTime() + ms * 1_000_000;
            long left;
            while ((left = end - System.nanoTime()) > 0) {
                try { lock.wait(Math.max(1, left / 1_000_000)); } catch (InterruptedException e) { throw new RuntimeException(e); }
            }
        }
    }

    static void parkFor(long ms) {
        long end = System.nanoTime() + ms * 1_000_000;
        long left;
        while ((left = end - System.nanoTime()) > 0) LockSupport.parkNanos(left);
    }

    public static void main(String[] args) throws Exception {
        final long runNs = (long) (Double.parseDouble(args.length > 0 ? args[0] : "5") * 1e9);
        final long[] t = new long[4];
        final Object own = new Object();
        final long start = System.nanoTime();
        Thread mixed = new Thread(() -> {
            while (System.nanoTime() - start < runNs) {
                long a = System.nanoTime();
                burn(20_000_000);
                long b = System.nanoTime();
                sleepFor(30);
                long c = System.nanoTime();
                waitFor(own, 20);
                long d = System.nanoTime();
                parkFor(15);
                long e = System.nanoTime();
                t[0] += b - a; t[1] += c - b; t[2] += d - c; t[3] += e - d;
            }
        }, "mixed");
        Thread blocked = new Thread(() -> {
            synchronized (HELD) { sink++; }
        }, "blocked");
        ServerSocket server = new ServerSocket(0);
        server.setSoTimeout((int) (runNs / 1_000_000) + 500);
        Thread acceptor = new Thread(() -> {
            try { server.accept(); } catch (Exception e) { /* timed out, or closed at the end of the run */ }
        }, "acceptor");
        acceptor.setDaemon(true);
        synchronized (HELD) {
            mixed.start();
            blocked.start();
            acceptor.start();
            mixed.join();
        }
        blocked.join();
        long run = System.nanoTime() - start;
        server.close();
        System.out.println("TRUTH run=" + run + " burn=" + t[0] + " sleep=" + t[1] + " wait=" + t[2] + " park=" + t[3]);
    }
}
