import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.function.LongUnaryOperator;

/**
 * Defines Worker (from a directory not on the class path) in a new class
 * loader on every iteration, runs it, drops the loader, and collects garbage
 * now and then so the classes unload while being sampled. Runs until main
 * has had CPU_SECONDS of CPU time (most of it in Worker.spin) and, with
 * "stdin", also until a line (or the end of input) arrives on stdin: the
 * test stops it once the agent has done what it waits for. Prints
 * "loaders=<loaders created> cpu_ms=<main's CPU time>".
 * Usage: Unload WORKER_DIR CPU_SECONDS [stdin]
 */
public class Unload {
    static volatile long sink;
    static volatile boolean stop;

    public static void main(String[] args) throws Exception {
        byte[] bytes = Files.readAllBytes(Paths.get(args[0], "Worker.class"));
        CpuBudget budget = CpuBudget.of(args[1]);
        if (args.length > 2 && args[2].equals("stdin")) {
            Thread reader = new Thread(() -> {
                try {
                    new BufferedReader(new InputStreamReader(System.in)).readLine();
                } catch (Exception e) {
                    // The end of input stops the program as a line does.
                }
                stop = true;
            }, "stdin-reader");
            reader.setDaemon(true);
            reader.start();
        } else {
            stop = true;
        }
        int loaders = 0;
        while (budget.more() || !stop) {
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
        System.out.println("loaders=" + loaders + " cpu_ms=" + budget.spentNs() / 1_000_000);
    }
}
