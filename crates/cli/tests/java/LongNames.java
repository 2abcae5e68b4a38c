/**
 * Threads with names longer than the kernel's 15 characters, started before
 * any profiler attaches: one spinning, one sleeping. The main thread renames
 * itself, prints "ready" and sleeps for the given number of seconds.
 */
public class LongNames {
    static volatile long sink;

    public static void main(String[] a) throws Exception {
        long until = System.nanoTime() + (long) (Double.parseDouble(a[0]) * 1e9);
        Thread spinner = new Thread(() -> {
            while (System.nanoTime() < until) {
                for (int i = 0; i < 100_000; i++) sink += i;
            }
        }, "spinner-with-a-long-name");
        Thread sleeper = new Thread(() -> {
            try {
                while (System.nanoTime() < until) Thread.sleep(50);
            } catch (InterruptedException e) {
                return;
            }
        }, "sleeper-with-a-long-name");
        spinner.setDaemon(true);
        sleeper.setDaemon(true);
        spinner.start();
        sleeper.start();
        Thread.currentThread().setName("main-renamed-before-attach");
        System.out.println("ready");
        while (System.nanoTime() < until) Thread.sleep(50);
    }
}
