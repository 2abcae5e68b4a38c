/**
 * Two threads burn CPU in two methods for different amounts of CPU time and
 * print the truth measured with ThreadMXBean: "TRUTH burnA=<ns> burnB=<ns>".
 * The threads do not read their own CPU clocks while they burn (CpuBudget
 * says why).
 */
public class Ratio {
    static volatile long sink;
    static volatile long cpuA, cpuB;

    static long mix(long x) {
        x ^= x << 13; x ^= x >>> 7; x ^= x << 17;
        return x;
    }

    static long burnA(double seconds) {
        CpuBudget budget = CpuBudget.of(seconds);
        long x = 1;
        while (budget.more()) {
            for (int i = 0; i < 20_000; i++) x = mix(x + i);
        }
        cpuA = budget.spentNs();
        return x;
    }

    static long burnB(double seconds) {
        CpuBudget budget = CpuBudget.of(seconds);
        long x = 2;
        while (budget.more()) {
            for (int i = 0; i < 20_000; i++) x = mix(x + i);
        }
        cpuB = budget.spentNs();
        return x;
    }

    public static void main(String[] args) throws Exception {
        double a = Double.parseDouble(args[0]), b = Double.parseDouble(args[1]);
        Thread ta = new Thread(() -> sink += burnA(a), "burner-a");
        Thread tb = new Thread(() -> sink += burnB(b), "burner-b");
        ta.start(); tb.start();
        ta.join(); tb.join();
        System.out.println("TRUTH burnA=" + cpuA + " burnB=" + cpuB);
    }
}
