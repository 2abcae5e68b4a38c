import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * Spins in Spin.loop, for amounts of main's CPU time. Modes: "forever" (until
 * killed, prints "ready" after 0.3 s of CPU), "rmdir DIR" (deletes DIR after
 * a second of CPU, then runs one more).
 */
public class Spin {
    static volatile long sink;

    static void loop(CpuBudget budget) {
        long x = 1;
        while (budget.more()) {
            for (int i = 0; i < 10_000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink += x;
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("forever")) {
            loop(CpuBudget.of(0.3));
            System.out.println("ready");
            System.out.flush();
            loop(CpuBudget.forever());
        }
        if (args[0].equals("rmdir")) {
            loop(CpuBudget.of(1));
            Files.delete(Paths.get(args[1]));
            loop(CpuBudget.of(1));
        }
    }
}
