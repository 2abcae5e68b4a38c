/**
 * "worker-1" allocates WorkerThing objects, "other-1" OtherThing objects;
 * main allocates CountedThing exactly COUNT times (for alloc=0).
 * Usage: AllocFilter COUNT
 */
public class AllocFilter {
    static class WorkerThing { long a, b, c; }
    static class OtherThing { long a, b, c; }
    static class CountedThing { long a; }
    static final Object[] keep = new Object[1024];

    static void churn(boolean worker) {
        for (int i = 0; i < 3_000_000; i++) keep[i & 1023] = worker ? new WorkerThing() : new OtherThing();
    }

    public static void main(String[] args) throws Exception {
        Thread w = new Thread(() -> churn(true), "worker-1");
        Thread o = new Thread(() -> churn(false), "other-1");
        w.start(); o.start();
        w.join(); o.join();
        int count = Integer.parseInt(args[0]);
        for (int i = 0; i < count; i++) keep[i & 1023] = new CountedThing();
        System.out.println("done");
    }
}
