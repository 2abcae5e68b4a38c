/**
 * Prints "ready", then spins in SpinUntilEof.spin, allocating a little,
 * until its standard input closes; then it ends normally (so an agent
 * writes what it holds at exit).
 */
public class SpinUntilEof {
    static volatile boolean done;
    static volatile double sink;
    static volatile Object kept;

    static void spin() {
        double s = 0;
        for (int i = 0; i < 100_000; i++) s += Math.sqrt(i) * Math.sin(i);
        sink += s;
        kept = new long[8192];
    }

    public static void main(String[] args) throws Exception {
        Thread reader = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {}
            } catch (Exception e) {
                // closed: done
            }
            done = true;
        }, "stdin-reader");
        reader.setDaemon(true);
        reader.start();
        System.out.println("ready");
        System.out.flush();
        while (!done) spin();
    }
}
