/**
 * Creates threads and processes one after another, each waited for (the
 * seed write-up's warning: profiling signals arriving faster than clone()
 * completes restart it forever). Args: threads, processes. Prints at the
 * end "TRUTH threads_ms=T procs_ms=P".
 */
public class Spawner {
    public static void main(String[] a) throws Exception {
        int threads = Integer.parseInt(a[0]), procs = Integer.parseInt(a[1]);
        long t0 = System.nanoTime();
        for (int i = 0; i < threads; i++) {
            Thread t = new Thread(() -> {});
            t.start();
            t.join();
        }
        long t1 = System.nanoTime();
        for (int i = 0; i < procs; i++) {
            new ProcessBuilder("true").start().waitFor();
        }
        long t2 = System.nanoTime();
        System.out.println("TRUTH threads_ms=" + (t1 - t0) / 1000000 + " procs_ms=" + (t2 - t1) / 1000000);
    }
}
