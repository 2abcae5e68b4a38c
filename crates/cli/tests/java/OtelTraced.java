import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.context.Context;
import io.opentelemetry.sdk.trace.ReadWriteSpan;
import io.opentelemetry.sdk.trace.SpanProcessor;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Requests traced through the docs' OxProfilerSpanProcessor
 * (docs/opentelemetry.md), driven the way the OpenTelemetry SDK drives a
 * span processor: onStart on the thread that starts a span, onEnd on the
 * thread that ends it.
 *
 * Two threads, "orders" and "search", serve requests for the given seconds:
 * each request is a root span (a new trace) holding a child span that burns
 * CPU in burnOrders or burnSearch (for the milliseconds of the optional
 * second argument; the optional third is a number of requests both
 * threads together serve at least, however long it takes). Each child span's (trace id, span id) is
 * written to spans.txt as "thread trace span", the truth the test checks the
 * samples' labels against. The orders thread then starts a span that another
 * thread ends (asynchronous work), starts and ends one more span, and burns
 * in burnAfter outside any span: those samples must carry no trace.
 */
public class OtelTraced {
    static final SpanProcessor PROCESSOR = new OxProfilerSpanProcessor();
    static volatile long sink;

    static final class Ids implements SpanContext {
        final String trace, span;

        Ids(String trace, String span) {
            this.trace = trace;
            this.span = span;
        }

        public String getTraceId() {
            return trace;
        }

        public String getSpanId() {
            return span;
        }
    }

    static final class Span implements ReadWriteSpan {
        final Ids ids;
        volatile boolean ended;

        Span(String trace) {
            ids = new Ids(trace, hex(16));
        }

        public SpanContext getSpanContext() {
            return ids;
        }

        public boolean hasEnded() {
            return ended;
        }

        void end() {
            ended = true;
            PROCESSOR.onEnd(this);
        }
    }

    static final Context ROOT = new Context() {};

    static Span start(String trace) {
        Span s = new Span(trace);
        PROCESSOR.onStart(ROOT, s);
        return s;
    }

    static String hex(int digits) {
        StringBuilder b = new StringBuilder();
        ThreadLocalRandom r = ThreadLocalRandom.current();
        for (int i = 0; i < digits; i++) {
            b.append(Character.forDigit(r.nextInt(16), 16));
        }
        return b.toString();
    }

    static long spin(long nanos) {
        long end = System.nanoTime() + nanos, x = 1;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
        }
        return x;
    }

    /** How long each request burns (the second argument, in ms; 5 by default). */
    static long burnNanos = 5_000_000;

    static void burnOrders() {
        sink += spin(burnNanos);
    }

    static void burnSearch() {
        sink += spin(burnNanos);
    }

    static void burnAfter() {
        sink += spin(400_000_000);
    }

    static final java.util.concurrent.atomic.AtomicLong SERVED = new java.util.concurrent.atomic.AtomicLong();
    static long atLeast;

    static void serve(String name, long until, List<String> truth) {
        while (System.nanoTime() < until || SERVED.get() < atLeast) {
            SERVED.incrementAndGet();
            String trace = hex(32);
            Span root = start(trace);
            Span child = start(trace);
            if (name.equals("orders")) {
                burnOrders();
            } else {
                burnSearch();
            }
            synchronized (truth) {
                truth.add(name + " " + trace + " " + child.ids.span);
            }
            child.end();
            root.end();
        }
    }

    public static void main(String[] args) throws Exception {
        long until = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        if (args.length > 1) {
            burnNanos = (long) (Double.parseDouble(args[1]) * 1e6);
        }
        if (args.length > 2) {
            atLeast = Long.parseLong(args[2]);
        }
        List<String> truth = new ArrayList<>();
        Thread orders = new Thread(() -> {
            serve("orders", until, truth);
            Span async = start(hex(32));
            Thread other = new Thread(async::end);
            other.start();
            try {
                other.join();
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
            start(hex(32)).end();
            burnAfter();
        }, "orders");
        Thread search = new Thread(() -> serve("search", until, truth), "search");
        orders.start();
        search.start();
        orders.join();
        search.join();
        try (PrintWriter w = new PrintWriter("spans.txt")) {
            for (String line : truth) {
                w.println(line);
            }
        }
        System.out.println("spans " + truth.size());
        System.out.println("labels " + one.oxprof.OxProfiler.labelStats());
    }
}
