/**
 * Fixed work for bench/fleet/upload_cost.py: ROUNDS rounds of a CPU loop
 * with allocations on two threads; prints "ELAPSED_MS <n>", the wall time
 * the work took as the program measured it.
 */
public class Work {
    static volatile long sink;

    static long round() {
        long s = 0;
        for (int i = 0; i < 2_000_000; i++) s += (i * 31L) ^ (s >>> 3);
        byte[][] keep = new byte[64][];
        for (int i = 0; i < 64; i++) keep[i] = new byte[1024 + i * 64];
        return s + keep.length;
    }

    public static void main(String[] args) throws Exception {
        int rounds = Integer.parseInt(args[0]);
        long t0 = System.nanoTime();
        Thread other = new Thread(() -> { for (int i = 0; i < rounds; i++) sink += round(); });
        other.start();
        for (int i = 0; i < rounds; i++) sink += round();
        other.join();
        System.out.println("ELAPSED_MS " + (System.nanoTime() - t0) / 1_000_000);
    }
}
