/**
 * One method that stays interpreted (the test excludes it from compilation),
 * one hot method the JIT compiles, and a small callee it inlines. Runs for
 * the given seconds of main's CPU time.
 */
public class FrameTypes {
    static volatile double sink;

    /** Excluded from compilation by the test: always interpreted. */
    static double cold(int n) {
        double s = 0;
        for (int i = 0; i < n; i++) s += (i % 7) * 0.5 + s * 1e-9;
        return s;
    }

    /** Small enough to be inlined into {@link #hot}. */
    static double callee(double x) {
        double y = x / (x + 3.0) + 1.0;
        y = y / (y + 5.0) + 1.0;
        return y / (y + 7.0) + x * 1e-9;
    }

    static double hot(int n) {
        double s = 1;
        for (int i = 0; i < n; i++) s = callee(s) + i * 1e-12;
        return s;
    }

    public static void main(String[] args) {
        CpuBudget budget = CpuBudget.of(args[0]);
        while (budget.more()) {
            sink += cold(20_000);
            for (int k = 0; k < 20; k++) sink += hot(10_000);
        }
    }
}
