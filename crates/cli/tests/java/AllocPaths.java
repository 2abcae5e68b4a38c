import java.lang.reflect.Array;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * Allocates through many different paths so oxprof's own allocation-stack
 * walk can be compared with JVMTI GetStackTrace: interpreted, C1- and
 * C2-compiled code with inlining, deep recursion, synchronized methods,
 * static initializers run by the VM, reflection and other native methods
 * that call back into Java, arrays made by native code, lambdas and
 * streams, string concatenation, exceptions, several threads, and (on
 * JDK 21+) a virtual thread. Compiled with --release 11.
 */
public class AllocPaths {
    static volatile Object sink;
    static long total;

    static Object small(int i) { return new int[2 + (i & 7)]; }
    static Object viaHelper(int i) { return small(i); }
    static Object inlineChain(int i) { return viaHelper(i + 1); }

    static Object recurse(int depth, int i) {
        return depth == 0 ? new long[4 + (i & 3)] : recurse(depth - 1, i);
    }

    static synchronized Object locked(int i) { return new StringBuilder().append(i).toString(); }

    static Object concat(int i) { return "item-" + i + "/" + (i * 31); }

    static Object reflective(Method m, int i) throws Exception { return m.invoke(null, i); }

    static Object nativeArray(int i) { return Array.newInstance(String.class, 3 + (i & 3)); }

    static Object cloned(int[] a) { return a.clone(); }

    static Object lambdas(int i) {
        List<String> l = IntStream.range(0, 4).mapToObj(k -> "v" + (k + i)).collect(Collectors.toList());
        return l;
    }

    static Object thrown(int i) {
        try {
            if ((i & 1) == 0) throw new IllegalStateException("x" + i);
            return null;
        } catch (IllegalStateException e) {
            return e;
        }
    }

    /** A class whose static initializer allocates; each is initialized once. */
    static Object initializeClass(int k) throws Exception {
        return Class.forName("AllocPaths$Init" + k, true, AllocPaths.class.getClassLoader());
    }

    static class Init0 { static final Object[] DATA = new Object[4096]; }
    static class Init1 { static final long[] DATA = new long[8192]; }
    static class Init2 { static final String[] DATA = new String[16384]; }

    static void work(int rounds) throws Exception {
        Method m = AllocPaths.class.getDeclaredMethod("small", int.class);
        int[] arr = new int[64];
        for (int i = 0; i < rounds; i++) {
            sink = small(i);
            sink = inlineChain(i);
            sink = recurse(20 + (i % 40), i);
            sink = locked(i);
            sink = concat(i);
            sink = nativeArray(i);
            sink = cloned(arr);
            if (i % 16 == 0) {
                sink = reflective(m, i);
                sink = lambdas(i);
                sink = thrown(i);
            }
            total++;
        }
    }

    public static void main(String[] args) throws Exception {
        int rounds = Integer.parseInt(args[0]);
        for (int k = 0; k < 3; k++) {
            sink = initializeClass(k);
        }
        // A cold interpreted phase, then a long compiled one on several threads.
        work(200);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
            Thread th = new Thread(() -> {
                try {
                    work(rounds);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, "paths-" + t);
            threads.add(th);
            th.start();
        }
        work(rounds);
        for (Thread th : threads) {
            th.join();
        }
        // A virtual thread, where the JDK has them.
        try {
            Method start = Thread.class.getMethod("startVirtualThread", Runnable.class);
            Thread v = (Thread) start.invoke(null, (Runnable) () -> {
                try {
                    work(rounds / 4);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            v.join();
            System.out.println("virtual thread ran");
        } catch (NoSuchMethodException e) {
            System.out.println("no virtual threads");
        }
        System.out.println("done " + total);
    }
}
