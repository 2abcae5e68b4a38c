import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * Loads N classes (copies of the template class C00000, renamed by patching
 * the class file's name bytes, each in the same loader), then measures how
 * long a busy thread is ever stopped: on each line "report" from stdin it
 * prints "maxgap_us=<longest gap between two loop iterations since the last
 * report>". Used to measure the pause an agent attach causes.
 * Usage: ManyClasses TEMPLATE_DIR N
 */
public class ManyClasses {
    static volatile long maxGap;
    static final List<Class<?>> keep = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        byte[] template = Files.readAllBytes(Paths.get(args[0], "C00000.class"));
        int n = Integer.parseInt(args[1]);
        ClassLoader loader = new ClassLoader(ManyClasses.class.getClassLoader()) {
            @Override
            protected Class<?> findClass(String name) throws ClassNotFoundException {
                if (!name.startsWith("C") || name.length() != 6) throw new ClassNotFoundException(name);
                byte[] b = template.clone();
                byte[] from = "C00000".getBytes(), to = name.getBytes();
                for (int i = 0; i + 6 <= b.length; i++) {
                    boolean match = true;
                    for (int j = 0; j < 6 && match; j++) match = b[i + j] == from[j];
                    if (match) System.arraycopy(to, 0, b, i, 6);
                }
                return defineClass(name, b, 0, b.length);
            }
        };
        for (int i = 0; i < n; i++) {
            Class<?> c = loader.loadClass(String.format("C%05d", i));
            c.getDeclaredConstructor().newInstance();
            keep.add(c);
        }
        Thread busy = new Thread(() -> {
            long last = System.nanoTime();
            while (true) {
                long now = System.nanoTime();
                if (now - last > maxGap) maxGap = now - last;
                last = now;
            }
        }, "busy");
        busy.setDaemon(true);
        busy.start();
        System.out.println("ready classes=" + n);
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.equals("report")) {
                System.out.println("maxgap_us=" + maxGap / 1000);
                System.out.flush();
                maxGap = 0;
            }
        }
    }
}
