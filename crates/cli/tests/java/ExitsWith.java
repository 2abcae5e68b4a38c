/** Spins for a tenth of a second of CPU, then exits with the status given (for the CLI's exit-code tests). */
public class ExitsWith {
    static volatile long sink;

    public static void main(String[] args) {
        CpuBudget budget = CpuBudget.of(0.1);
        long x = 1;
        while (budget.more()) {
            for (int i = 0; i < 10_000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink = x;
        System.exit(Integer.parseInt(args[0]));
    }
}
