import java.io.BufferedReader;
import java.io.InputStreamReader;

import one.oxprof.OxProfiler;

/**
 * Drives oxprof through its Java API (oxprof.jar), one step per argument:
 * "burn:S" spends S seconds of CPU in ApiUser.apiHot; "label:K=V:S" does
 * the same inside a context labelled K=V; "wait" prints "ready"
 * and waits for a line on stdin (for the test to attach meanwhile); any
 * other argument is a command for OxProfiler.execute. Each command prints
 * one line, "OK <reply>" (reply lines joined by " | ") or "EXC <exception
 * class> <message>". Prints "END <library path>" at the end.
 */
public class ApiUser {
    static volatile double sink;

    static double apiHot(int n) {
        double s = 0;
        for (int i = 0; i < n; i++) s += Math.sqrt(i) * Math.cos(i);
        return s;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        OxProfiler p = null;
        for (String step : args) {
            if (step.startsWith("burn:")) {
                CpuBudget budget = CpuBudget.of(step.substring(5));
                while (budget.more()) sink += apiHot(50_000);
                continue;
            }
            if (step.startsWith("label:")) {
                String spec = step.substring(6);
                int colon = spec.lastIndexOf(':'), eq = spec.indexOf('=');
                CpuBudget budget = CpuBudget.of(spec.substring(colon + 1));
                try (OxProfiler.Context c = OxProfiler.context(spec.substring(0, eq), spec.substring(eq + 1, colon))) {
                    while (budget.more()) sink += apiHot(50_000);
                }
                continue;
            }
            if (step.equals("wait")) {
                System.out.println("ready");
                System.out.flush();
                in.readLine();
                continue;
            }
            try {
                if (p == null) p = OxProfiler.getInstance();
                String reply = p.execute(step);
                System.out.println("OK " + reply.replace("\n", " | "));
            } catch (RuntimeException | UnsatisfiedLinkError e) {
                System.out.println("EXC " + e.getClass().getName() + " " + e.getMessage());
            }
            System.out.flush();
        }
        System.out.println("END " + (p == null ? "-" : p.getLibraryPath()));
    }
}
