import java.io.BufferedReader;
import java.io.InputStreamReader;

/**
 * CPU and allocation work with known methods: JfrWork.spin burns CPU,
 * JfrWork.allocBytes allocates 4-KiB byte arrays and JfrWork.allocStrings
 * small strings, on the main thread and a thread named "jfr-worker", each
 * for SECONDS of its own CPU time.
 * Usage: JfrWork SECONDS [wait] — with "wait", prints "done" afterwards and
 * waits for a line on stdin before exiting.
 */
public class JfrWork {
    static volatile Object keep;
    static volatile double sink;

    static double spin(int n) {
        double x = 0;
        for (int i = 0; i < n; i++) x += Math.sqrt(i + x);
        return x;
    }

    static void allocBytes() {
        for (int i = 0; i < 64; i++) keep = new byte[4096];
    }

    static void allocStrings() {
        for (int i = 0; i < 64; i++) keep = new StringBuilder().append(i).append('x').toString();
    }

    static void work(double seconds) {
        CpuBudget budget = CpuBudget.of(seconds);
        while (budget.more()) {
            sink += spin(20_000);
            allocBytes();
            allocStrings();
        }
    }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        Thread worker = new Thread(() -> work(seconds), "jfr-worker");
        worker.start();
        work(seconds);
        worker.join();
        if (args.length > 1 && args[1].equals("wait")) {
            System.out.println("done");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in)).readLine();
        }
    }
}
