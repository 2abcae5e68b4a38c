/** A small method the JIT inlines into a hot loop: samples must name it. Runs for the given seconds of main's CPU time. */
public class Inline {
    static volatile double sink;

    static double inner(double x) {
        double y = x * 1.000001 + 3.0;
        for (int k = 0; k < 8; k++) y = y * 0.999999 + x / (y + 1.0);
        return y;
    }

    static double outer(int n) {
        double s = 0;
        for (int i = 0; i < n; i++) s += inner(i);
        return s;
    }

    public static void main(String[] args) {
        CpuBudget budget = CpuBudget.of(args[0]);
        while (budget.more()) sink += outer(100_000);
    }
}
