import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * oxprof's demo: a small "service" with a few distinct hot spots, so a flame
 * graph of it has something to show. Three threads run for a few seconds:
 * one sorts, one hashes, and main parses log lines with a regex and counts
 * words in a map. Usage: java Demo [seconds]
 */
public class Demo {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5.0;
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        Thread sorter = new Thread(() -> sortLoop(deadline), "sorter");
        Thread hasher = new Thread(() -> hashLoop(deadline), "hasher");
        sorter.start();
        hasher.start();
        parseLoop(deadline);
        sorter.join();
        hasher.join();
        System.out.println("demo done (" + sink + ")");
    }

    static void sortLoop(long deadline) {
        Random r = new Random(1);
        while (System.nanoTime() < deadline) {
            int[] a = new int[200_000];
            for (int i = 0; i < a.length; i++) a[i] = r.nextInt();
            Arrays.sort(a);
            sink += a[a.length / 2];
        }
    }

    static void hashLoop(long deadline) {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            byte[] block = new byte[64 * 1024];
            new Random(2).nextBytes(block);
            while (System.nanoTime() < deadline) {
                md.update(block);
                sink += md.digest()[0];
            }
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static final Pattern LINE = Pattern.compile("(\\d+\\.\\d+\\.\\d+\\.\\d+) \\[(\\w+)\\] GET (/\\S*) (\\d{3})");

    static void parseLoop(long deadline) {
        List<String> lines = new ArrayList<>();
        Random r = new Random(3);
        String[] paths = {"/", "/api/users", "/api/orders/42", "/static/app.js", "/health"};
        for (int i = 0; i < 10_000; i++) {
            lines.add("10.0." + r.nextInt(256) + "." + r.nextInt(256) + " [worker" + r.nextInt(8) + "] GET "
                    + paths[r.nextInt(paths.length)] + " " + (r.nextInt(10) == 0 ? 500 : 200));
        }
        Map<String, Integer> hits = new HashMap<>();
        while (System.nanoTime() < deadline) {
            for (String line : lines) {
                Matcher m = LINE.matcher(line);
                if (m.matches()) {
                    hits.merge(m.group(3) + " " + m.group(4), 1, Integer::sum);
                }
            }
        }
        sink += hits.size();
    }
}
