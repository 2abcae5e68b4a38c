import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;

/**
 * Virtual threads with deep stacks, for tests/vthread_stacks.rs. Each
 * virtual thread calls VtStacks.task, which recurses through VtStacks.deep
 * DEPTH times (MIN_DEPTH + id % 16) and then runs VtStacks.work: compute,
 * allocate, sleep 1 ms (which unmounts the thread: when it resumes, HotSpot
 * thaws only its top frames back onto the carrier's stack), compute again.
 * So every CPU sample in VtStacks.work has, whole, the virtual thread's
 * entry (Continuation.enter, VirtualThread.run), VtStacks.task, at least
 * MIN_DEPTH VtStacks.deep frames and VtStacks.work, in that order.
 *
 * Usage: VtStacks THREADS ROUNDS. Started through reflection so that it
 * compiles with --release 11 (JDK 21+ to run). Prints one line
 * "TRUTH threads=<virtual threads that finished> min_depth=<MIN_DEPTH>
 * chain=<the frames of one virtual thread at work, root first, as
 * Thread.getStackTrace gives them>".
 */
public class VtStacks {
    static final int MIN_DEPTH = 12;
    static volatile double sink;
    static volatile Object kept;
    static volatile String chain;

    static double burn(int n) {
        double x = 0;
        for (int i = 0; i < n; i++) {
            x += Math.sqrt(i);
            if ((i & 255) == 0) x /= 2;
        }
        return x;
    }

    static void work() throws InterruptedException {
        if (chain == null) {
            StringBuilder b = new StringBuilder();
            StackTraceElement[] st = Thread.currentThread().getStackTrace();
            for (int i = st.length - 1; i >= 1; i--) {
                if (b.length() > 0) b.append(';');
                b.append(st[i].getClassName()).append('.').append(st[i].getMethodName());
            }
            chain = b.toString();
        }
        sink = burn(30_000);
        for (int i = 0; i < 8; i++) kept = new byte[2048];
        Thread.sleep(1);
        sink = burn(30_000);
        for (int i = 0; i < 8; i++) kept = new long[256];
        sink = burn(30_000);
    }

    static void deep(int d) throws InterruptedException {
        if (d > 0) {
            deep(d - 1);
            return;
        }
        work();
    }

    static void task(int id) {
        try {
            deep(MIN_DEPTH + id % 16);
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        int rounds = Integer.parseInt(args[1]);
        Method ofVirtual = Thread.class.getMethod("ofVirtual");
        Method start = Class.forName("java.lang.Thread$Builder").getMethod("start", Runnable.class);
        int finished = 0;
        for (int r = 0; r < rounds; r++) {
            List<Thread> started = new ArrayList<>(threads);
            for (int i = 0; i < threads; i++) {
                final int id = i;
                Runnable body = () -> task(id);
                started.add((Thread) start.invoke(ofVirtual.invoke(null), body));
            }
            for (Thread t : started) {
                t.join();
                finished++;
            }
        }
        System.out.println("TRUTH threads=" + finished + " min_depth=" + MIN_DEPTH + " chain=" + chain);
    }
}
