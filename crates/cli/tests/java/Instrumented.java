import java.io.BufferedReader;
import java.io.InputStreamReader;

/**
 * The program whose class EntryCounter (a java.lang.instrument agent)
 * rewrites at load, inserting a counter at each method's entry. Prints
 * "ready" once the rewritten class runs, then calls hot() and allocate()
 * until its main thread has spent the given seconds of CPU time, or, with
 * "stdin", until a line arrives on its standard input. With "retransform"
 * as second argument, a thread has the agent rewrite the class again every
 * 100 ms meanwhile (java.lang.instrument retransformation). Then prints:
 *   HOT_LINE n      the line of hot's loop, as a StackTraceElement taken in it says
 *   ALLOC_LINE n    the line of allocate's allocations, likewise
 *   MAIN_LINE n     the line of main's loop, likewise
 *   CALLS n         calls of this class's methods the program made (main's included)
 *   ENTRIES n       method entries the inserted code counted (-1: no such code)
 *   REWRITES n      times the agent rewrote the class
 *   RETRANSFORMS n  retransformations asked for
 * Each loop is on one line, so that every sample taken in it has that line.
 * This class has no lambdas and no static initialiser: every entry into it
 * is a call the program counts.
 */
public class Instrumented {
    static volatile double sink;
    static volatile Object keep;
    static volatile int hotLine, allocLine, mainLine;
    static volatile boolean stop;

    static double hot(int n) {
        double s = 0;
        for (int i = 0; i < n; i++) { s += Math.sqrt(i) * Math.sin(i); if (hotLine == 0) hotLine = new Throwable().getStackTrace()[0].getLineNumber(); }
        return s;
    }

    static Object allocate(int n) {
        Object[] a = new Object[n]; for (int i = 0; i < n; i += 4) a[i] = new long[8]; if (allocLine == 0) allocLine = new Throwable().getStackTrace()[0].getLineNumber();
        return a;
    }

    public static void main(String[] args) throws Exception {
        long calls = 1; // this main
        sink += hot(1000);
        calls++;
        System.out.println("ready");
        System.out.flush();
        boolean untilStdin = args[0].equals("stdin");
        if (untilStdin) Helpers.stopOnStdin();
        Helpers.Retransformer retransformer = args.length > 1 && args[1].equals("retransform") ? Helpers.retransformEvery100ms() : null;
        CpuBudget budget = untilStdin ? CpuBudget.forever() : CpuBudget.of(args[0]);
        while (budget.more() && !stop) { sink += hot(200_000); keep = allocate(4_000); calls += 2; if (mainLine == 0) mainLine = new Throwable().getStackTrace()[0].getLineNumber(); }
        int retransforms = retransformer == null ? 0 : retransformer.finish();
        long entries;
        try {
            entries = Instrumented.class.getDeclaredField("$entries").getLong(null);
        } catch (NoSuchFieldException e) {
            entries = -1;
        }
        System.out.println("HOT_LINE " + hotLine);
        System.out.println("ALLOC_LINE " + allocLine);
        System.out.println("MAIN_LINE " + mainLine);
        System.out.println("CALLS " + calls);
        System.out.println("ENTRIES " + entries);
        System.out.println("REWRITES " + Class.forName("EntryCounter").getMethod("rewrites").invoke(null));
        System.out.println("RETRANSFORMS " + retransforms);
    }
}

/** What Instrumented does beside its work, in classes the agent leaves alone. */
class Helpers {
    static void stopOnStdin() {
        Thread t = new Thread(Helpers::waitForLine, "stdin");
        t.setDaemon(true);
        t.start();
    }

    static void waitForLine() {
        try {
            new BufferedReader(new InputStreamReader(System.in)).readLine();
        } catch (Exception e) {
            // end of input counts as the line
        }
        Instrumented.stop = true;
    }

    static Retransformer retransformEvery100ms() {
        Retransformer r = new Retransformer();
        r.setDaemon(true);
        r.start();
        return r;
    }

    static final class Retransformer extends Thread {
        volatile boolean done;
        int count;
        Throwable failure;

        Retransformer() {
            super("retransformer");
        }

        @Override
        public void run() {
            try {
                java.lang.reflect.Method retransform = Class.forName("EntryCounter").getMethod("retransform", Class.class);
                while (!done) {
                    retransform.invoke(null, Instrumented.class);
                    count++;
                    Thread.sleep(100);
                }
            } catch (Throwable t) {
                failure = t;
            }
        }

        int finish() throws Exception {
            done = true;
            join();
            if (failure != null) throw new RuntimeException("retransformation failed", failure);
            return count;
        }
    }
}
