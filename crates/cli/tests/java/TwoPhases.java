import java.io.BufferedReader;
import java.io.InputStreamReader;

/**
 * Two phases in two methods, told apart in a profile: prints "ready", spins
 * in TwoPhases.before until a line comes on standard input, then spins in
 * TwoPhases.after for the CPU seconds given (default 0.5), and ends
 * normally (so an agent writes what it holds at exit). With "wait", it then
 * waits for standard input to close before ending.
 */
public class TwoPhases {
    static volatile long sink;
    static volatile boolean next;

    static void before() {
        long x = 1;
        while (!next) {
            for (int i = 0; i < 10_000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink += x;
    }

    static void after(CpuBudget budget) {
        long x = 3;
        while (budget.more()) {
            for (int i = 0; i < 10_000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink += x;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 0.5;
        boolean wait = args.length > 1 && args[1].equals("wait");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Thread reader = new Thread(() -> {
            try {
                in.readLine();
            } catch (Exception e) {
                // closed: go on all the same
            }
            next = true;
        }, "stdin-reader");
        reader.setDaemon(true);
        reader.start();
        System.out.println("ready");
        System.out.flush();
        before();
        after(CpuBudget.of(seconds));
        System.out.println("after done");
        System.out.flush();
        if (wait) {
            while (in.read() >= 0) {}
        }
    }
}
