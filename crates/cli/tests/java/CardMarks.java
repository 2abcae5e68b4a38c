import java.util.concurrent.ThreadLocalRandom;

/**
 * Reference stores into an old array for the stack walk tests: compiled code
 * storing young objects into a large, long-lived array dirties cards, and
 * G1's post-write barrier then calls into the VM as a leaf call, without
 * recording a last Java frame (queueing the card, handing a full buffer
 * over). Two threads store, each until it has spent a number of seconds of
 * CPU time (first argument; see CpuBudget); the
 * only Java method that stores is {@code CardMarks.store}, always called
 * from {@code CardMarks.work} under {@code main} or a thread's
 * {@code run}. Prints how many stores it made.
 */
public class CardMarks {
    static final Object[][] OLD = new Object[64][];

    static int store(Object[] into, int n) {
        ThreadLocalRandom r = ThreadLocalRandom.current();
        for (int i = 0; i < n; i++) {
            into[r.nextInt(into.length)] = new int[1 + (i & 7)];
        }
        return n;
    }

    static long work(int part, String seconds) {
        CpuBudget budget = CpuBudget.of(seconds);
        long stores = 0;
        while (budget.more()) {
            for (int k = part; k < OLD.length; k += 2) {
                stores += store(OLD[k], 512);
            }
        }
        return stores;
    }

    public static void main(String[] a) throws Exception {
        for (int k = 0; k < OLD.length; k++) OLD[k] = new Object[1 << 16];
        System.gc(); // the arrays are old from here on
        long[] made = new long[2];
        Thread other = new Thread(() -> made[1] = work(1, a[0]), "storer");
        other.start();
        made[0] = work(0, a[0]);
        other.join();
        System.out.println("TRUTH stores=" + (made[0] + made[1]));
    }
}
