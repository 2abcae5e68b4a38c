import java.util.ArrayList;
import java.util.List;

/**
 * A leak beside churn: leakSite keeps every 1-KiB array it allocates in the
 * static list RETAINED; churnSite allocates ten times as much and drops it at
 * once. Prints "TRUTH retained=<bytes>". Usage: LeakChurn LEAK_MB
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
