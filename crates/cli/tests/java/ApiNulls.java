import one.oxprof.OxProfiler;

/**
 * What the Java API does with null arguments, before and during a
 * recording. Each case prints "CASE <name> OK" or "CASE <name> EXC
 * <exception class> <message>" on one line; then "STATUS <reply>".
 * The argument is the file of the recording it starts.
 */
public class ApiNulls {
    interface Call {
        Object run();
    }

    static void tryIt(String name, Call c) {
        String out;
        try {
            Object r = c.run();
            if (r instanceof AutoCloseable) {
                ((AutoCloseable) r).close();
            }
            out = "OK";
        } catch (Exception e) {
            out = "EXC " + e.getClass().getName() + " " + String.valueOf(e.getMessage()).replace("\n", " | ");
        }
        System.out.println("CASE " + name + " " + out);
    }

    static void contexts(String when) {
        tryIt(when + "-null-key", () -> OxProfiler.context(null, "v"));
        tryIt(when + "-null-value", () -> OxProfiler.context("k", null));
        tryIt(when + "-null-key2", () -> OxProfiler.context("k", "v", null, "w"));
        tryIt(when + "-null-array", () -> OxProfiler.context((String[]) null));
        tryIt(when + "-null-in-array", () -> OxProfiler.context("a", "1", "b", "2", null, "3"));
    }

    public static void main(String[] args) {
        OxProfiler p = OxProfiler.getInstance();
        contexts("idle");
        tryIt("execute-null", () -> p.execute(null));
        tryIt("start-null", () -> p.start(null));
        tryIt("dump-null", () -> p.dump(null));
        System.out.println("STATUS " + p.status());
        tryIt("start", () -> p.start("event=cpu,interval=5ms,file=" + args[0]));
        contexts("running");
        tryIt("dump-null-running", () -> p.dump(null));
        tryIt("stop", p::stop);
    }
}
