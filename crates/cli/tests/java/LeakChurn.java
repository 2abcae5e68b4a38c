import java.util.ArrayList;
import java.util.List;

/**
 * A leak beside churn: leakSite keeps every 1-KiB array it allocates in the
 * static list RETAINED; churnSite allocates ten times as much and drops it at
 * once. Prints "TRUTH retained=<bytes>". Usage: LeakChurn LEAK_MB, or
 * LeakChurn forever KIB_PER_SECOND: a steady leak until killed (prints "ready"
 * once it runs).
 */
public class LeakChurn {
    static final List<byte[]> RETAINED = new ArrayList<>();
    static volatile Object sink;

    static void leakSite() {
        RETAINED.add(new byte[1024 - 16]);
    }

    static void churnSite() {
        for (int i = 0; i < 10; i++) sink = new byte[1024 - 16];
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("forever")) {
            long perSecond = Long.parseLong(args[1]);
            System.out.println("ready");
            System.out.flush();
            long start = System.nanoTime();
            for (long i = 0; ; i++) {
                leakSite();
                churnSite();
                // Keep to the rate: i KiB leaked after i / perSecond seconds.
                long due = start + i * 1_000_000_000L / perSecond;
                long wait = due - System.nanoTime();
                if (wait > 1_000_000) Thread.sleep(wait / 1_000_000);
            }
        }
        long leakBytes = Long.parseLong(args[0]) << 20;
        long steps = leakBytes / 1024;
        for (long i = 0; i < steps; i++) {
            leakSite();
            churnSite();
            if (i % 8192 == 0) Thread.sleep(1); // spread the leak over time
        }
        System.out.println("TRUTH retained=" + (RETAINED.size() * 1024L));
    }
}
