import java.util.ArrayList;
import java.util.List;

/**
 * Keeps a large, changing set of small objects alive so the collector has
 * much to copy and mark: a fixed amount of work. Args: millions of nodes.
 */
public class GcChurn {
    static final class Node {
        final Node next;
        final long[] payload;
        Node(Node next, int n) { this.next = next; this.payload = new long[n]; }
    }

    public static void main(String[] args) {
        long nodes = Long.parseLong(args[0]) * 1_000_000L;
        List<Node> live = new ArrayList<>();
        for (int i = 0; i < 4096; i++) live.add(null);
        long made = 0;
        int i = 0;
        while (made < nodes) {
            Node chain = null;
            for (int k = 0; k < 64; k++) chain = new Node(chain, 1 + (k & 7));
            live.set(i++ & 4095, chain);
            made += 64;
        }
        System.out.println("nodes: " + made);
    }
}
