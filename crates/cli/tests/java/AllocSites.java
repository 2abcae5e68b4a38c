import java.lang.management.ManagementFactory;

/**
 * Three allocation sites with known object sizes, each on its own thread:
 * 40-byte, 1-KiB and 256-KiB byte arrays (16-byte array header included).
 * Prints the truth from com.sun.management.ThreadMXBean:
 * "TRUTH small=<bytes> medium=<bytes> large=<bytes>". Usage: AllocSites MB_PER_SITE
 */
public class AllocSites {
    static final com.sun.management.ThreadMXBean MX = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    static final Object[] keep = new Object[64];
    static volatile long small, medium, large;

    static long measure(Runnable site) {
        long id = Thread.currentThread().getId();
        long before = MX.getThreadAllocatedBytes(id);
        site.run();
        return MX.getThreadAllocatedBytes(id) - before;
    }

    static void smallSite(long bytes) {
        for (long done = 0; done < bytes; done += 40) keep[(int) (done & 63)] = new byte[24];
    }

    static void mediumSite(long bytes) {
        for (long done = 0; done < bytes; done += 1024) keep[(int) ((done >> 10) & 63)] = new byte[1024 - 16];
    }

    static void largeSite(long bytes) {
        for (long done = 0; done < bytes; done += 256 * 1024) keep[(int) ((done >> 18) & 63)] = new byte[256 * 1024 - 16];
    }

    public static void main(String[] args) throws Exception {
        long bytes = Long.parseLong(args[0]) << 20;
        Thread a = new Thread(() -> small = measure(() -> smallSite(bytes)), "site-small");
        Thread b = new Thread(() -> medium = measure(() -> mediumSite(bytes)), "site-medium");
        Thread c = new Thread(() -> large = measure(() -> largeSite(bytes)), "site-large");
        a.start(); b.start(); c.start();
        a.join(); b.join(); c.join();
        System.out.println("TRUTH small=" + small + " medium=" + medium + " large=" + large);
    }
}
