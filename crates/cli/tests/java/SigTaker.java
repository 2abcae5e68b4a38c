import java.util.concurrent.atomic.AtomicLong;
import sun.misc.Signal;

/**
 * Takes a signal oxprof samples with, the way an application can: two
 * threads burn CPU; after BEFORE seconds the program installs its own
 * handler for SIGNAL (PROF, VTALRM, ...) with sun.misc.Signal, which
 * replaces whatever handler was there, then burns AFTER seconds more.
 * Its handler counts what it receives. Prints "taken" when the handler is
 * installed, then "HANDLED total=<n> late=<m>", where late counts the
 * signals received more than 0.5 s after the handler was installed.
 * Usage: SigTaker SIGNAL BEFORE_SECONDS AFTER_SECONDS
 */
public class SigTaker {
    static final AtomicLong handled = new AtomicLong();
    static final AtomicLong late = new AtomicLong();
    static volatile long takenAt;
    static volatile boolean done;
    static volatile double sink;

    static void burn() {
        double s = 0;
        while (!done) {
            for (int i = 1; i < 100_000; i++) s += Math.sqrt(i) * Math.sin(i);
            sink = s;
        }
    }

    public static void main(String[] args) throws Exception {
        String name = args[0];
        long before = (long) (Double.parseDouble(args[1]) * 1000);
        long after = (long) (Double.parseDouble(args[2]) * 1000);
        Thread other = new Thread(SigTaker::burn, "burner");
        other.start();
        Thread main = new Thread(SigTaker::burn, "burner-2");
        main.start();
        Thread.sleep(before);
        takenAt = System.nanoTime();
        Signal.handle(new Signal(name), sig -> {
            handled.incrementAndGet();
            if (System.nanoTime() - takenAt > 500_000_000L) late.incrementAndGet();
        });
        System.out.println("taken");
        Thread.sleep(after);
        done = true;
        other.join();
        main.join();
        // Signals already queued to the dispatcher are counted.
        Thread.sleep(100);
        System.out.println("HANDLED total=" + handled.get() + " late=" + late.get());
    }
}
