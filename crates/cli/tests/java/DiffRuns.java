/**
 * The same code run twice, differing only in what a profile of it should
 * not care about: with `flip`, another lambda is spun first (so the
 * worker's lambda class gets another counter on JDKs before 21) and the
 * worker is another OS thread. Burns CPU in `spin` on a thread named
 * `worker`; prints the CPU it burned.
 */
public class DiffRuns {
    static volatile long sink;

    static long spin(long ms) {
        long end = System.nanoTime() + ms * 1_000_000L, x = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) x += i ^ (x >>> 3);
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("flip")) {
            Runnable other = () -> sink++;
            other.run();
            Thread t = new Thread(other, "warm");
            t.start();
            t.join();
        }
        Runnable work = () -> sink = spin(1500);
        Thread t = new Thread(work, "worker");
        t.start();
        t.join();
    }
}
