/**
 * Prints "ready", burns the given seconds of its main thread's CPU time in
 * CpuBurn.spin, then prints "CPU_NS <the main thread's CPU time in ns>" as
 * ThreadMXBean measured it. The thread does not read its own CPU clock while
 * it burns (CpuBudget says why).
 */
public class CpuBurn {
    static volatile double sink;

    static void spin() {
        double s = 0;
        for (int i = 0; i < 200_000; i++) s += Math.sqrt(i) * Math.sin(i);
        sink += s;
    }

    public static void main(String[] args) {
        System.out.println("ready");
        System.out.flush();
        CpuBudget budget = CpuBudget.of(args[0]);
        while (budget.more()) spin();
        System.out.println("CPU_NS " + budget.spentNs());
    }
}
