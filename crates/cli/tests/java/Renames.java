/**
 * Threads rename themselves while they run, as pool threads do when they
 * take a task. A worker burns CPU in {@code before()} under its first name,
 * then in {@code after()} under its second (the given number of seconds of
 * its own CPU time each), and ends. A daemon burns in {@code spin()}, is
 * renamed half way through the worker's run and is still running when the
 * JVM exits. Prints both threads' names at the end.
 */
public class Renames {
    static volatile long sink;

    static void burn(double seconds) {
        java.lang.management.ThreadMXBean mx = java.lang.management.ManagementFactory.getThreadMXBean();
        long until = mx.getCurrentThreadCpuTime() + (long) (seconds * 1e9);
        while (mx.getCurrentThreadCpuTime() < until) {
            for (int i = 0; i < 100_000; i++) sink += i;
        }
    }

    static void before(double s) { burn(s); }

    static void after(double s) { burn(s); }

    static void spin() {
        while (true) burn(0.01);
    }

    public static void main(String[] a) throws Exception {
        double s = Double.parseDouble(a[0]);
        Thread daemon = new Thread(Renames::spin, "daemon-as-started");
        daemon.setDaemon(true);
        Thread w = new Thread(() -> {
            before(s);
            Thread.currentThread().setName("worker-taking-task-42");
            daemon.setName("daemon-renamed-while-running");
            after(s);
        }, "worker-as-started");
        daemon.start();
        w.start();
        w.join();
        System.out.println("worker: " + w.getName());
        System.out.println("daemon: " + daemon.getName());
    }
}
