/**
 * Enters `Thread.sleep` (JVM_Sleep, the test's begin trigger) once, then
 * burns CPU and never calls `Thread.yield` (JVM_Yield, the end trigger): the
 * window opened by the sleep is still open at exit.
 */
public class OpenWindow {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        Thread.sleep(5);
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000L, x = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) x += i ^ (x >>> 3);
        }
        sink = x;
    }
}
