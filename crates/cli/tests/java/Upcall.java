/**
 * Burns CPU in a static initializer: the JVM runs it through a call from the
 * VM (an entry frame) on behalf of main, so a walk must cross the VM's frames
 * to reach main. Burns the seconds of CPU time the property "seconds" gives.
 */
public class Upcall {
    static volatile double sink;

    static final class Holder {
        static final double VALUE;

        static {
            CpuBudget budget = CpuBudget.of(System.getProperty("seconds", "2"));
            double s = 0;
            while (budget.more()) s += work(10_000);
            VALUE = s;
        }

        static double work(int n) {
            double s = 0;
            for (int i = 0; i < n; i++) s += Math.sqrt(i + s * 1e-9);
            return s;
        }
    }

    public static void main(String[] args) {
        sink = Holder.VALUE;
    }
}
