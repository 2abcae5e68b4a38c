import java.util.ArrayList;
import java.util.List;

/**
 * A large cache filled once at start (cacheSite: CACHE_MB of 4-KiB arrays),
 * then a small steady leak (leakSite: LEAK_KIB_PER_S of 1-KiB arrays kept)
 * beside churn, for SECONDS. Prints "TRUTH cache=<bytes> leak=<bytes>".
 * Usage: CacheAndLeak CACHE_MB LEAK_KIB_PER_S SECONDS
 */
public class CacheAndLeak {
    static final List<byte[]> CACHE = new ArrayList<>();
    static final List<byte[]> LEAK = new ArrayList<>();
    static volatile Object sink;

    static void cacheSite() { CACHE.add(new byte[4096 - 16]); }
    static void leakSite() { LEAK.add(new byte[1024 - 16]); }
    static void churnSite() { for (int i = 0; i < 10; i++) sink = new byte[1024 - 16]; }

    public static void main(String[] args) throws Exception {
        long cache = Long.parseLong(args[0]) << 20;
        long perSecond = Long.parseLong(args[1]);
        double seconds = Double.parseDouble(args[2]);
        for (long b = 0; b < cache; b += 4096) cacheSite();
        long start = System.nanoTime(), end = start + (long) (seconds * 1e9);
        for (long i = 0; System.nanoTime() < end; i++) {
            leakSite();
            churnSite();
            long wait = start + i * 1_000_000_000L / perSecond - System.nanoTime();
            if (wait > 1_000_000) Thread.sleep(wait / 1_000_000);
        }
        System.out.println("TRUTH cache=" + CACHE.size() * 4096L + " leak=" + LEAK.size() * 1024L);
    }
}
