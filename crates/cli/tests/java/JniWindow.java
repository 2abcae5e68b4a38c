/**
 * Alternates equal CPU work inside and outside a window marked by two JNI
 * calls (tests/c/window.c). Args: the library's path, seconds to run.
 * Prints "ready" once the library is loaded, and at the end
 * "truth windows=N inside_ns=I outside_ns=O".
 */
public class JniWindow {
    static native void windowBegin();
    static native void windowEnd();

    static volatile long sink;

    static long inside(long seed) {
        long x = seed;
        for (int i = 0; i < 2_000_000; i++) x = x * 6364136223846793005L + i;
        return x;
    }

    static long outside(long seed) {
        long x = seed;
        for (int i = 0; i < 2_000_000; i++) x = x * 6364136223846793005L + i;
        return x;
    }

    public static void main(String[] args) throws Exception {
        System.load(args[0]);
        double seconds = Double.parseDouble(args[1]);
        System.out.println("ready");
        System.out.flush();
        long windows = 0, in = 0, out = 0, s = 1;
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (System.nanoTime() < end) {
            long a = System.nanoTime();
            windowBegin();
            s += inside(s);
            windowEnd();
            long b = System.nanoTime();
            s += outside(s);
            long c = System.nanoTime();
            windows++;
            in += b - a;
            out += c - b;
        }
        sink = s;
        System.out.println("truth windows=" + windows + " inside_ns=" + in + " outside_ns=" + out);
    }
}
