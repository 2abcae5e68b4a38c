import java.util.ArrayList;
import java.util.List;

/**
 * Allocates a lot and keeps nothing: each round fills a list with PEAK_MB of
 * 4-KiB arrays, then drops it. Prints "TRUTH peak=<bytes>".
 * Usage: NoLeak PEAK_MB ROUNDS
 */
public class NoLeak {
    static List<byte[]> batch;

    public static void main(String[] args) {
        long peak = Long.parseLong(args[0]) << 20;
        int rounds = Integer.parseInt(args[1]);
        for (int r = 0; r < rounds; r++) {
            batch = new ArrayList<>();
            for (long b = 0; b < peak; b += 4096) batch.add(new byte[4096 - 16]);
            batch = null;
        }
        System.out.println("TRUTH peak=" + peak);
    }
}
