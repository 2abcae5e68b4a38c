import java.util.concurrent.CountDownLatch;

/**
 * Sixteen threads allocate and burn CPU, then all call System.exit(0) at the
 * same moment while the agent records (tests/exit.rs). Prints "ready" first.
 */
public class ManyExits {
    static volatile long sink;
    public static void main(String[] a) throws Exception {
        System.out.println("ready");
        System.out.flush();
        int n = 16;
        CountDownLatch go = new CountDownLatch(1);
        for (int i = 0; i < n; i++) {
            final int k = i;
            new Thread(() -> {
                long x = 0;
                for (int j = 0; j < 2_000_000; j++) { x += new byte[64].length + j; }
                sink = x;
                try { go.await(); } catch (InterruptedException e) {}
                System.exit(0);
            }).start();
        }
        Thread.sleep(800);
        go.countDown();
        Thread.sleep(10_000);
    }
}
