/**
 * Spends most of its CPU inside the JVM on behalf of Java code: allocating
 * large arrays (zeroed by the VM, with frequent collections in a small heap).
 * Run with -Xint so every allocation goes through the interpreter's runtime
 * call, whose last Java frame AsyncGetCallTrace cannot walk. Runs for the
 * given seconds of main's CPU time.
 */
public class VmHeavy {
    static volatile Object keep;

    static void allocate(int rounds) {
        for (int i = 0; i < rounds; i++) keep = new long[64 * 1024];
    }

    public static void main(String[] args) {
        CpuBudget budget = CpuBudget.of(args[0]);
        while (budget.more()) allocate(100);
    }
}
