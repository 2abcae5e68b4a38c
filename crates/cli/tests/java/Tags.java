/**
 * Virtual calls to small methods that the JIT does not inline (the test runs
 * with CompileCommand=dontinline, as a megamorphic call site would be): each
 * call enters a compiled method through its prologue, so CPU samples land
 * there too, where the frame is half built. The four classes are called
 * equally often by construction (the array cycles through them), and each
 * method does the same work (one Math.sin), so each gets a quarter of the
 * methods' samples. Works until the main thread has spent a number of
 * seconds of CPU time (first argument, default 3; see CpuBudget). Prints
 * "TRUTH calls=<n>" at the end.
 */
public class Tags {
    abstract static class Node {
        double seed;

        abstract int tag();
    }

    static final class A extends Node {
        int tag() {
            return 1 + (int) Math.sin(seed++);
        }
    }

    static final class B extends Node {
        int tag() {
            return 2 + (int) Math.sin(seed++);
        }
    }

    static final class C extends Node {
        int tag() {
            return 3 + (int) Math.sin(seed++);
        }
    }

    static final class D extends Node {
        int tag() {
            return 4 + (int) Math.sin(seed++);
        }
    }

    static long sum(Node[] nodes, int rounds) {
        long s = 0;
        for (int r = 0; r < rounds; r++) {
            for (Node n : nodes) {
                s += n.tag();
            }
        }
        return s;
    }

    public static void main(String[] args) {
        Node[] nodes = new Node[1024];
        for (int i = 0; i < nodes.length; i++) {
            int k = i % 4;
            nodes[i] = k == 0 ? new A() : k == 1 ? new B() : k == 2 ? new C() : new D();
        }
        CpuBudget budget = CpuBudget.of(args.length > 0 ? args[0] : "3");
        long calls = 0, s = 0;
        while (budget.more()) {
            s += sum(nodes, 100);
            calls += 100L * nodes.length;
        }
        System.out.println("TRUTH calls=" + calls + " sum=" + s);
    }
}
