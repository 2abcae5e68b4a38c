/**
 * Spends most of its CPU inside the JVM on behalf of Java code: allocating
 * large arrays (zeroed by the VM, with frequent collections in a small heap).
 * Run with -Xint so every allocation goes through the interpreter's runtime
 * call, whose last Java frame AsyncGetCallTrace cannot walk.
 */
public class VmHeavy {
    static volatile Object keep;

    static void allocate(int rounds) {
        for (int i = 0; i < rounds; i++) keep = new long[64 * 1024];
    }

    public static void main(String[] args) {
        long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        while (System.nanoTime() < end) allocate(100);
    }
}
