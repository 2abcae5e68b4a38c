/**
 * Forces safepoints whose VM operations are known, counting its own calls:
 * thread dumps (Thread.getAllStackTraces, the ThreadDump operation) and
 * full collections (System.gc, G1CollectFull under G1), while a daemon
 * thread spins so that CPU samples come in. Prints "dumps=N gcs=M".
 * Usage: Safepoints DUMPS GCS
 */
public class Safepoints {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int wantDumps = Integer.parseInt(args[0]);
        int wantGcs = Integer.parseInt(args[1]);
        Thread spinner = new Thread(() -> {
            long s = 0;
            while (true) {
                for (int i = 0; i < 1_000_000; i++) s += i ^ (s >>> 3);
                sink = s;
            }
        }, "spinner");
        spinner.setDaemon(true);
        spinner.start();
        int dumps = 0, gcs = 0;
        for (int i = 0; i < wantDumps; i++) {
            if (Thread.getAllStackTraces().isEmpty()) throw new AssertionError("no threads");
            dumps++;
            Thread.sleep(5);
        }
        for (int i = 0; i < wantGcs; i++) {
            System.gc();
            gcs++;
        }
        System.out.println("dumps=" + dumps + " gcs=" + gcs);
    }
}
