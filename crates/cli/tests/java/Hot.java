/** Two known hot methods, called from main for a given number of seconds of its CPU time. */
public class Hot {
    static volatile double sink;

    static double sqrtSin(int n) {
        double s = 0;
        for (int i = 0; i < n; i++) s += Math.sqrt(i) * Math.sin(i);
        return s;
    }

    static double logs(int n) {
        double s = 0;
        for (int i = 0; i < n; i++) s += Math.log(i + 1);
        return s;
    }

    public static void main(String[] args) {
        CpuBudget budget = CpuBudget.of(args.length > 0 ? Double.parseDouble(args[0]) : 2);
        while (budget.more()) {
            sink += sqrtSin(50_000);
            sink += logs(50_000);
        }
        System.out.println("done");
        if (args.length > 1 && args[1].equals("exit3")) System.exit(3);
    }
}
