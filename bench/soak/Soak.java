import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * A service under churn for the continuous-profiling soak (bench/soak/soak.py):
 * a stable cache built at start (Soak.buildCache, then untouched), a slow
 * leak (Soak.leak: LEAK_KIB_PER_S KiB a second kept for good), allocation
 * churn (short-lived objects from several sites), thread churn (a short-lived
 * thread every 20 ms) and class churn (Churned defined again by a new class
 * loader every 200 ms, its loaders dropped so the classes unload).
 *
 * Every 60 s it calls System.gc() (as RMI's distributed GC does, hourly by
 * default): only a full collection reliably unloads the churned classes
 * (G1's concurrent cycles treat young class mirrors as live), and the soak
 * is about what the agent keeps, not about what the JVM keeps.
 *
 * Usage: Soak MINUTES [CACHE_MIB] [LEAK_KIB_PER_S] [CLASSES_PER_S] [LOCKERS].
 * CLASSES_PER_S (default 5) sets the class churn; LOCKERS (default 0)
 * threads contend for one monitor in Soak.contend. Prints "ready" once the
 * cache is built, then "LEAKED <bytes>" every 10 s.
 */
public class Soak {
    static byte[][] cache;
    static final List<byte[]> leaked = new ArrayList<>();
    static volatile long sink;

    static void buildCache(int mib) {
        cache = new byte[mib * 16][];
        for (int i = 0; i < cache.length; i++) cache[i] = new byte[64 * 1024];
    }

    static void leak(int kib) {
        for (int i = 0; i < kib; i++) leaked.add(new byte[1024]);
    }

    static final Object LOCK = new Object();

    static void contend() {
        synchronized (LOCK) {
            sink += churnArrays();
        }
    }

    static String churnStrings() {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 200; i++) sb.append(i).append(',');
        return sb.toString();
    }

    static long churnArrays() {
        long s = 0;
        for (int i = 0; i < 50; i++) {
            int[] a = new int[ThreadLocalRandom.current().nextInt(16, 2048)];
            s += a.length;
        }
        return s;
    }

    static void work() {
        for (int i = 0; i < 20; i++) {
            sink += churnStrings().length();
            sink += churnArrays();
        }
    }

    static byte[] churnedBytes() throws Exception {
        try (InputStream in = Soak.class.getResourceAsStream("/Churned.class")) {
            return in.readAllBytes();
        }
    }

    static final class OneShot extends ClassLoader {
        OneShot() { super(Soak.class.getClassLoader()); }
        Class<?> define(byte[] b) { return defineClass("Churned", b, 0, b.length); }
    }

    public static void main(String[] args) throws Exception {
        long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 60e9);
        int cacheMib = args.length > 1 ? Integer.parseInt(args[1]) : 1024;
        int leakKibPerS = args.length > 2 ? Integer.parseInt(args[2]) : 100;
        int classesPerS = args.length > 3 ? Integer.parseInt(args[3]) : 5;
        int lockers = args.length > 4 ? Integer.parseInt(args[4]) : 0;
        for (int i = 0; i < lockers; i++) {
            Thread l = new Thread(() -> { while (true) contend(); }, "locker-" + i);
            l.setDaemon(true);
            l.start();
        }
        buildCache(cacheMib);
        byte[] churned = churnedBytes();
        System.out.println("ready");
        System.out.flush();
        Thread churner = new Thread(() -> {
            while (true) {
                work();
                try { Thread.sleep(2); } catch (InterruptedException e) { return; }
            }
        }, "churner");
        churner.setDaemon(true);
        churner.start();
        long start = System.nanoTime();
        long tick = 0, classes = 0, lastReport = 0, lastGc = 0;
        while (System.nanoTime() < end) {
            Thread t = new Thread(Soak::work, "short-" + tick);
            t.start();
            double secs = (System.nanoTime() - start) / 1e9;
            // Time-based, so the rates hold whatever the machine's speed.
            while (classes < secs * classesPerS) {
                Class<?> c = new OneShot().define(churned);
                sink += (long) c.getMethod("run", int.class).invoke(null, (int) classes);
                classes++;
            }
            long owedKib = (long) (secs * leakKibPerS) - leaked.size();
            if (owedKib > 0) leak((int) owedKib);
            if ((long) secs / 60 > lastGc) {
                lastGc = (long) secs / 60;
                System.gc();
            }
            if (secs - lastReport >= 10) {
                lastReport = (long) secs;
                System.out.println("LEAKED " + (long) leaked.size() * 1024);
                System.out.flush();
            }
            t.join();
            Thread.sleep(20);
            tick++;
        }
        System.out.println("done");
    }
}
