import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;

/**
 * Fills a cache of long[128] arrays as the very first thing the main thread
 * does, keeps it, and prints what it allocated on the way, measured by the
 * JVM's own per-thread allocation counter (com.sun.management.ThreadMXBean).
 * Usage: FirstFill MIB. Prints `allocated BYTES`.
 */
public class FirstFill {
    static List<long[]> cache = new ArrayList<>();

    static void fill(long bytes) {
        long arrays = bytes / 1040;
        for (long i = 0; i < arrays; i++) {
            cache.add(new long[128]);
        }
    }

    public static void main(String[] args) {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long id = Thread.currentThread().getId();
        long mib = Long.parseLong(args[0]);
        long before = mx.getThreadAllocatedBytes(id);
        fill(mib << 20);
        long after = mx.getThreadAllocatedBytes(id);
        System.out.println("allocated " + (after - before) + " arrays " + cache.size());
    }
}
