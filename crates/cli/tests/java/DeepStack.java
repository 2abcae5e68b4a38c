/**
 * Burns 1.5 s of CPU at the bottom of a recursion DEPTH calls deep (the
 * first argument): `DeepStack.main` is the root of every sample of
 * `down`, as deep as the profiler keeps stacks.
 */
public class DeepStack {
    static volatile double sink;

    public static void main(String[] args) {
        int depth = Integer.parseInt(args[0]);
        CpuBudget budget = CpuBudget.of(1.5);
        while (budget.more()) {
            sink += down(depth);
        }
    }

    static double down(int left) {
        if (left == 0) {
            double x = 0;
            for (int i = 0; i < 100_000; i++) {
                x += Math.sqrt(i + x);
            }
            return x;
        }
        return down(left - 1) + 1;
    }
}
