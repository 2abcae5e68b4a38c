/**
 * Requests safepoints as fast as it can (each `Thread.getAllStackTraces` is
 * one VM operation run at a safepoint) until it has made `n` requests; prints
 * how many it made.
 */
public class ManySafepoints {
    static volatile long sink;

    public static void main(String[] args) {
        long n = Long.parseLong(args[0]), made = 0;
        while (made < n) {
            sink += Thread.getAllStackTraces().size();
            made++;
        }
        System.out.println("TRUTH requests=" + made);
    }
}
