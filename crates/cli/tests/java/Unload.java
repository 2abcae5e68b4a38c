import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.function.LongUnaryOperator;

/**
 * Defines Worker (from a directory not on the class path) in a new class
 * loader on every iteration, runs it, drops the loader, and collects garbage
 * now and then so the classes unload while being sampled.
 * Usage: Unload WORKER_DIR SECONDS
 */
public class Unload {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        byte[] bytes = Files.readAllBytes(Paths.get(args[0], "Worker.class"));
        long end = System.nanoTime() + (long) (Double.parseDouble(args[1]) * 1e9);
        int loaders = 0;
        while (System.nanoTime() < end) {
            ClassLoader cl = new ClassLoader(null) {
                @Override
                protected Class<?> findClass(String name) throws ClassNotFoundException {
                    if (name.equals("Worker")) return defineClass(name, bytes, 0, bytes.length);
                    throw new ClassNotFoundException(name);
                }
            };
            LongUnaryOperator w = (LongUnaryOperator) cl.loadClass("Worker").getDeclaredConstructor().newInstance();
            sink += w.applyAsLong(200_000);
            if (++loaders % 100 == 0) System.gc();
        }
        System.out.println("loaders=" + loaders);
    }
}
