import java.io.File;
import java.net.URL;
import java.net.URLClassLoader;

/**
 * Loads LoaderLinesWork through a class loader of its own (as a web
 * application's or a plugin's classes are), from the directory given as
 * the first argument, and runs its CPU-bound `spin` for 1.5 s of CPU. The
 * class can unload, so the agent must not ask the JVM about its methods
 * once it has; while it lives, its samples still get their line numbers.
 */
public class LoaderLines {
    public static void main(String[] args) throws Exception {
        URL[] urls = { new File(args[0]).toURI().toURL() };
        try (URLClassLoader loader = new URLClassLoader(urls, LoaderLines.class.getClassLoader())) {
            Class<?> c = loader.loadClass("LoaderLinesWork");
            if (c.getClassLoader() != loader) {
                throw new IllegalStateException("LoaderLinesWork came from " + c.getClassLoader());
            }
            Runnable work = (Runnable) c.getDeclaredConstructor().newInstance();
            work.run();
        }
    }
}
