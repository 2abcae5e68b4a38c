import java.util.ArrayList;
import java.util.List;

/**
 * A stable cache and a steady leak beside churn, for the leak table of the
 * HTML page (crates/cli/tests/leak_page.rs):
 *   - CacheStore.fill keeps CACHE_MIB of long[128] arrays at start and never
 *     grows again (the largest live site, not a leak);
 *   - Session.<init> allocates a byte[4080] per session, and every session is
 *     kept in a static list: LEAK_KIB_PER_S, paced by the clock, for SECONDS
 *     (the leak; its frame name holds '<' and '>', the class names '$');
 *   - Churn.request drops 64-KiB buffers at once, so young GCs come often;
 *   - at the end, after System.gc(), TAIL_MIB of 64-KiB buffers dropped at
 *     once (Tail.drop), so a report without a forced GC has that much that no
 *     GC has judged.
 * Prints "TRUTH cache_live=<bytes> leak_live=<bytes> tail_alloc=<bytes>", the
 * sizes of the arrays it keeps (16-byte header, rounded up to 8 bytes).
 * Usage: LeakPage SECONDS LEAK_KIB_PER_S CACHE_MIB TAIL_MIB
 */
public class LeakPage {
    static long arrayBytes(long elems, int elemSize) { return (16 + elems * elemSize + 7) / 8 * 8; }

    static final class CacheStore {
        static final List<long[]> ITEMS = new ArrayList<>();
        static long retained;
        static void fill(int mib) {
            long want = (long) mib << 20;
            while (retained < want) {
                long[] a = new long[128];
                a[0] = retained;
                ITEMS.add(a);
                retained += arrayBytes(128, 8);
            }
        }
    }

    static final class Session {
        static final List<Session> ALL = new ArrayList<>();
        static long retained;
        final byte[] state;
        Session() {
            state = new byte[4080];
            state[0] = 1;
            retained += arrayBytes(4080, 1);
        }
    }

    static final class Churn {
        static volatile Object sink;
        static void request() {
            for (int i = 0; i < 48; i++) {
                byte[] b = new byte[64 * 1024];
                b[i] = 1;
                sink = b;
            }
        }
    }

    static final class Tail {
        static volatile Object sink;
        static long allocated;
        static void drop(int mib) {
            for (long done = 0; done < ((long) mib << 20); done += 64 * 1024) {
                byte[] b = new byte[64 * 1024];
                b[1] = 1;
                sink = b;
                allocated += arrayBytes(64 * 1024, 1);
            }
            sink = null;
        }
    }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        long leakPerSecond = Long.parseLong(args[1]) * 1024;
        int cacheMib = Integer.parseInt(args[2]);
        int tailMib = Integer.parseInt(args[3]);
        CacheStore.fill(cacheMib);
        // One step every 10 ms: its share of the leak, then churn.
        long sessionsPerStep = Math.max(1, leakPerSecond / 100 / 4096);
        long start = System.nanoTime(), end = start + (long) (seconds * 1e9);
        for (long step = 0; System.nanoTime() < end; step++) {
            for (long i = 0; i < sessionsPerStep; i++) Session.ALL.add(new Session());
            Churn.request();
            long wait = start + (step + 1) * 10_000_000L - System.nanoTime();
            if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
        }
        if (tailMib > 0) {
            System.gc();
            Tail.drop(tailMib);
        }
        System.out.println("TRUTH cache_live=" + CacheStore.retained + " leak_live=" + Session.retained + " tail_alloc=" + Tail.allocated
                + " sessions=" + Session.ALL.size() + " cache_items=" + CacheStore.ITEMS.size());
    }
}
