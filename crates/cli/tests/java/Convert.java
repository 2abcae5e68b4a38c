import java.util.ArrayList;
import java.util.List;

/** A known hot method, a known allocation site and objects kept alive, for the converter tests. Runs for the given seconds of main's CPU time. */
public class Convert {
    static volatile long sink;
    static final List<int[]> kept = new ArrayList<>();

    static long spin(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) s += i * 31L ^ (s >>> 3);
        return s;
    }

    static int allocBytes(int n) {
        List<byte[]> l = new ArrayList<>();
        for (int i = 0; i < n; i++) l.add(new byte[1024]);
        return l.size();
    }

    public static void main(String[] args) {
        CpuBudget budget = CpuBudget.of(args[0]);
        while (budget.more()) {
            sink += spin(2_000_000);
            sink += allocBytes(200);
            kept.add(new int[4096]);
            if (kept.size() > 3000) kept.clear();
        }
        System.out.println("done " + kept.size());
    }
}
