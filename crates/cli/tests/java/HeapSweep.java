import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;

/**
 * A service-like workload for checking allocation and live-object profiling.
 *   - a stable cache of long[] arrays filled at start (CatalogCache.fill), never growing
 *   - a slow leak: SessionRegistry.register puts a byte[] per "session" in a static map, never removed
 *   - churn on worker threads: RequestHandler.{parseHeaders (byte[] small), decodeBody (int[] medium), renderPage (byte[] large)}
 *   - optional humongous churn: ReportExporter.export (byte[] of several MiB)
 * Prints "TRUTH key=value ..." with allocated bytes per site (array sizes) and retained bytes.
 * args: seconds workers leakKiBps cacheMiB humongousPerSec [tailMiB]
 * tailMiB: at the end, after System.gc(), allocate that much garbage (byte[64 KiB] each, dropped
 * at once) at ResponseBuffer.tail, so the exit comes with a known amount of unjudged garbage.
 */
public class HeapSweep {
    static long arr(long elems, int elemSize) { return (16 + elems * elemSize + 7) / 8 * 8; }

    static final class CatalogCache {
        static final Map<Integer, long[]> ITEMS = new HashMap<>();
        static long allocated, retained;
        static void fill(int mib) {
            int n = mib * 1024 * 1024 / 1040;     // long[128] = 1040 bytes
            for (int i = 0; i < n; i++) {
                long[] a = new long[128];
                a[0] = i;
                ITEMS.put(i, a);
                allocated += arr(128, 8);
            }
            retained = allocated;
        }
    }

    static final class SessionRegistry {
        static final Map<Long, byte[]> SESSIONS = new ConcurrentHashMap<>();
        static final AtomicLong NEXT = new AtomicLong();
        static long allocated;
        static void register(int size) {
            byte[] state = new byte[size];
            state[0] = 1;
            SESSIONS.put(NEXT.incrementAndGet(), state);
            allocated += arr(size, 1);
        }
    }

    static final class RequestHandler {
        final Object[] ring = new Object[256];
        int slot;
        final Random rnd;
        long tiny, medium, large, requests;
        RequestHandler(long seed) { rnd = new Random(seed); }
        void keep(Object o) { ring[slot++ & 255] = o; }
        void parseHeaders() {
            for (int i = 0; i < 20; i++) { byte[] b = new byte[32]; b[1] = (byte) i; keep(b); tiny += arr(32, 1); }
        }
        void decodeBody() {
            for (int i = 0; i < 4; i++) { int[] b = new int[250]; b[1] = i; keep(b); medium += arr(250, 4); }
        }
        void renderPage() {
            int n = 16 * 1024 + rnd.nextInt(112 * 1024);
            byte[] b = new byte[n]; b[1] = 1; keep(b); large += arr(n, 1);
        }
        void handle() { parseHeaders(); decodeBody(); if ((++requests & 7) == 0) renderPage(); }
    }

    static final class ReportExporter {
        static volatile Object sink;
        static long allocated;
        static void export() { byte[] b = new byte[6 * 1024 * 1024]; b[5] = 1; sink = b; allocated += arr(b.length, 1); }
    }

    static final class ResponseBuffer {
        static volatile Object sink;
        static long allocated;
        static void tail(int mib) {
            for (int i = 0; i < mib * 16; i++) { byte[] b = new byte[65536 - 16]; b[3] = 1; sink = b; allocated += arr(b.length, 1); }
            sink = null;
        }
    }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        int workers = Integer.parseInt(args[1]);
        int leakKiBps = Integer.parseInt(args[2]);
        int cacheMiB = Integer.parseInt(args[3]);
        double humongousPerSec = args.length > 4 ? Double.parseDouble(args[4]) : 0;
        int tailMiB = args.length > 5 ? Integer.parseInt(args[5]) : 0;
        CatalogCache.fill(cacheMiB);
        System.out.println("READY cache filled");
        long t0 = System.nanoTime();
        long end = t0 + (long) (seconds * 1e9);
        List<RequestHandler> handlers = Collections.synchronizedList(new ArrayList<>());
        List<Thread> threads = new ArrayList<>();
        for (int w = 0; w < workers; w++) {
            RequestHandler h = new RequestHandler(w);
            handlers.add(h);
            Thread t = new Thread(() -> {
                while (System.nanoTime() < end) {
                    for (int k = 0; k < 64; k++) h.handle();
                    if (workers > 16) Thread.yield();
                }
            }, "worker-" + w);
            t.start();
            threads.add(t);
        }
        // The leak and the humongous exports, paced on main.
        int sessionSize = 2000;
        long leaked = 0;
        double hum = 0;
        while (System.nanoTime() < end) {
            double el = (System.nanoTime() - t0) / 1e9;
            long want = (long) (el * leakKiBps * 1024.0 / sessionSize);
            while (leaked < want) { SessionRegistry.register(sessionSize); leaked++; }
            while (humongousPerSec > 0 && hum < el * humongousPerSec) { ReportExporter.export(); hum++; }
            Thread.sleep(10);
        }
        for (Thread t : threads) t.join();
        if (tailMiB > 0) { System.gc(); ResponseBuffer.tail(tailMiB); }
        long tiny = 0, medium = 0, large = 0;
        for (RequestHandler h : handlers) { tiny += h.tiny; medium += h.medium; large += h.large; }
        System.out.printf("TRUTH cache_alloc=%d cache_live=%d leak_alloc=%d leak_live=%d leak_entries=%d tiny_alloc=%d medium_alloc=%d large_alloc=%d humongous_alloc=%d tail_alloc=%d seconds=%.2f%n",
            CatalogCache.allocated, CatalogCache.retained, SessionRegistry.allocated, SessionRegistry.allocated, SessionRegistry.SESSIONS.size(),
            tiny, medium, large, ReportExporter.allocated, ResponseBuffer.allocated, (System.nanoTime() - t0) / 1e9);
    }
}
