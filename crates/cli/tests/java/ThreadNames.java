import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * Threads that name or rename themselves while they burn a known amount of
 * their own CPU time, for the thread-name tests (tests/thread_names.rs). The
 * native ones are plain pthreads of tests/c/thread_names.c (never attached to
 * the JVM); the Java one has a name longer than the kernel's 15 characters.
 *
 * Usage: ThreadNames DIR PHASE... where DIR holds libthread_names.so and each
 * PHASE is one of
 *   own:NAME:MS           a native thread named NAME from its start burns MS of CPU, ends
 *   renamed:NAME:B:A      a native thread burns B ms under the name it inherited,
 *                         renames itself NAME, burns A ms, ends
 *   live:NAME:B:A         the same, then stays alive (blocked) until the JVM exits
 *   java:NAME:MS          a Java thread named NAME burns MS of CPU, ends
 * Prints `TRUTH key=ms ...` (the CPU time each part burnt, as the thread
 * measured it), `INHERITED name` (the name the native threads started with)
 * and `JAVA_KERNEL_NAME name` (the Java thread's kernel name, cut by HotSpot).
 */
public class ThreadNames {
    static native String run(int scenario, String name, long beforeNs, long afterNs, long[] out);

    static volatile double sink;

    /** Burns `ns` of this thread's CPU time; returns what it used. */
    static long javaBurn(long ns) {
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long start = mx.getCurrentThreadCpuTime(), used = 0;
        double x = 1.0;
        while (used < ns) {
            for (int i = 0; i < 20000; i++) x = x * 1.0000001 + 0.5 / x;
            used = mx.getCurrentThreadCpuTime() - start;
        }
        sink = x;
        return used;
    }

    public static void main(String[] args) throws Exception {
        System.load(new java.io.File(args[0], "libthread_names.so").getAbsolutePath());
        StringBuilder truth = new StringBuilder("TRUTH");
        String inherited = null;
        for (int i = 1; i < args.length; i++) {
            String[] p = args[i].split(":");
            String kind = p[0], name = p[1];
            long[] out = new long[2];
            switch (kind) {
                case "own":
                    inherited = run(0, name, 0, ms(p[2]), out);
                    truth.append(' ').append(kind).append('=').append(out[1] / 1e6);
                    break;
                case "renamed":
                case "live":
                    inherited = run(kind.equals("renamed") ? 1 : 2, name, ms(p[2]), ms(p[3]), out);
                    truth.append(' ').append(kind).append("_before=").append(out[0] / 1e6);
                    truth.append(' ').append(kind).append("_after=").append(out[1] / 1e6);
                    break;
                case "java": {
                    long[] used = new long[1];
                    String[] comm = new String[1];
                    Thread t = new Thread(() -> {
                        used[0] = javaBurn(ms(p[2]));
                        comm[0] = kernelName();
                    }, name);
                    t.start();
                    t.join();
                    truth.append(' ').append(kind).append('=').append(used[0] / 1e6);
                    javaComm = comm[0];
                    break;
                }
                default:
                    throw new IllegalArgumentException(args[i]);
            }
            if (inherited == null && !kind.equals("java")) throw new IllegalStateException("no native thread for " + args[i]);
        }
        System.out.println(truth);
        System.out.println("INHERITED " + inherited);
        if (javaComm != null) System.out.println("JAVA_KERNEL_NAME " + javaComm);
    }

    static String javaComm;

    /** This thread's kernel name (`comm`, at most 15 characters). */
    static String kernelName() {
        try {
            return new String(java.nio.file.Files.readAllBytes(java.nio.file.Paths.get("/proc/thread-self/comm"))).trim();
        } catch (java.io.IOException e) {
            return "?";
        }
    }

    static long ms(String s) {
        return Long.parseLong(s) * 1_000_000L;
    }
}
