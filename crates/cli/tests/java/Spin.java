import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * Spins in Spin.loop. Modes: "forever" (until killed, prints "ready" first),
 * "rmdir DIR" (deletes DIR after a second, then runs one more second).
 */
public class Spin {
    static volatile long sink;

    static void loop(long nanos) {
        long end = System.nanoTime() + nanos;
        long x = 1;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 10_000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink += x;
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("forever")) {
            loop(300_000_000L);
            System.out.println("ready");
            System.out.flush();
            while (true) loop(1_000_000_000L);
        }
        if (args[0].equals("rmdir")) {
            loop(1_000_000_000L);
            Files.delete(Paths.get(args[1]));
            loop(1_000_000_000L);
        }
    }
}
