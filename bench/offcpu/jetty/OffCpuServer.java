// Embedded Jetty 9 server whose servlet spends its requests' time off-CPU at
// distinctly named methods ("sites"), and measures that time itself, for the
// wall-clock and lock profiling benchmark of issue 24. Driven by run.py (same
// folder).
//
// Build: javac --release 17 -cp "$(jetty jars)" -d classes OffCpuServer.java
// Run:   java -cp classes:$(jetty jars) OffCpuServer [port=0] [threads=200]
//            [sleepMs=2] [holdUs=250] [cpuIters=20000]
// Prints "READY port=N" on stdout once it accepts connections.
// URLs:  /sleep    cpuWork, then sleepSite: Thread.sleep(sleepMs)
//        /contend  cpuWork, then every other request of a thread monitorSite
//                  (synchronized on one shared Object), the others lockSite
//                  (one shared ReentrantLock, non-fair); the holder parks
//                  holdUs inside the critical section, so under load the
//                  waiters queue on both locks
//        /truth    the servlet's own measurements so far (JSON)
//        /quit     stops Jetty and exits the JVM with status 0 (so the agents
//                  write their output)
//
// Truth: System.nanoTime() read around Thread.sleep (sleep_ns) and around each
// lock acquisition (from before the acquire to the first statement inside:
// monitor_wait_ns, lock_wait_ns; an uncontended acquisition adds a few tens
// of ns), with the number of acquisitions that took over 20 us
// (*_slow: contended ones; HotSpot spins briefly before a monitor blocks, and
// that spinning is part of the truth but not of a JVMTI monitor wait).

import java.io.IOException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;

import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;
import org.eclipse.jetty.util.thread.QueuedThreadPool;

public final class OffCpuServer extends HttpServlet {
    private static final long serialVersionUID = 1L;
    static final long SLOW_NS = 20_000;

    static final Object MONITOR = new Object();
    static final ReentrantLock LOCK = new ReentrantLock();

    static final LongAdder SLEEP_NS = new LongAdder();
    static final LongAdder SLEEPS = new LongAdder();
    static final LongAdder MON_WAIT_NS = new LongAdder();
    static final LongAdder MON_ACQ = new LongAdder();
    static final LongAdder MON_SLOW = new LongAdder();
    static final LongAdder LOCK_WAIT_NS = new LongAdder();
    static final LongAdder LOCK_ACQ = new LongAdder();
    static final LongAdder LOCK_SLOW = new LongAdder();
    static final LongAdder REQUESTS = new LongAdder();
    static final LongAdder SINK = new LongAdder();
    static volatile Server server;
    static int sleepMs = 2;
    static long holdNs = 250_000;
    static int cpuIters = 20_000;

    static final class State {
        long seed = Thread.currentThread().getId() * 0x9E3779B97F4A7C15L + 1;
        long n;
    }

    static final ThreadLocal<State> STATE = ThreadLocal.withInitial(State::new);

    /** A little CPU per request (an LCG; the result is kept so it is not removed). */
    static void cpuWork(State s) {
        long x = s.seed;
        for (int i = 0; i < cpuIters; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            x ^= x >>> 29;
        }
        s.seed = x;
        if ((x & 0xFFFF) == 0) {
            SINK.increment();
        }
    }

    static void sleepSite() throws InterruptedException {
        long t0 = System.nanoTime();
        Thread.sleep(sleepMs);
        SLEEP_NS.add(System.nanoTime() - t0);
        SLEEPS.increment();
    }

    static void hold() {
        LockSupport.parkNanos(holdNs); // no blocker: not a lock wait
    }

    static void monitorSite() {
        long t0 = System.nanoTime();
        long t1;
        synchronized (MONITOR) {
            t1 = System.nanoTime();
            hold();
        }
        long w = t1 - t0;
        MON_WAIT_NS.add(w);
        MON_ACQ.increment();
        if (w > SLOW_NS) {
            MON_SLOW.increment();
        }
    }

    static void lockSite() {
        long t0 = System.nanoTime();
        LOCK.lock();
        long t1;
        try {
            t1 = System.nanoTime();
            hold();
        } finally {
            LOCK.unlock();
        }
        long w = t1 - t0;
        LOCK_WAIT_NS.add(w);
        LOCK_ACQ.increment();
        if (w > SLOW_NS) {
            LOCK_SLOW.increment();
        }
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        String path = req.getRequestURI();
        if ("/truth".equals(path)) {
            resp.setContentType("application/json");
            resp.getWriter().print(truthJson());
            return;
        }
        if ("/quit".equals(path)) {
            resp.getWriter().print("bye\n");
            Thread t = new Thread(() -> {
                try {
                    Thread.sleep(200);
                    server.stop();
                } catch (Exception e) {
                    e.printStackTrace();
                }
                System.out.println("TRUTH " + truthJson());
                System.exit(0);
            }, "quit");
            t.start();
            return;
        }
        State s = STATE.get();
        cpuWork(s);
        if ("/sleep".equals(path)) {
            try {
                sleepSite();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        } else if ("/contend".equals(path)) {
            if ((s.n++ & 1) == 0) {
                monitorSite();
            } else {
                lockSite();
            }
        } else {
            resp.sendError(404);
            return;
        }
        REQUESTS.increment();
        resp.setContentType("text/plain");
        resp.getWriter().print("ok\n");
    }

    static String truthJson() {
        return "{\"sleep_ns\":" + SLEEP_NS.sum() + ",\"sleeps\":" + SLEEPS.sum()
                + ",\"monitor_wait_ns\":" + MON_WAIT_NS.sum() + ",\"monitor_acq\":" + MON_ACQ.sum()
                + ",\"monitor_slow\":" + MON_SLOW.sum()
                + ",\"lock_wait_ns\":" + LOCK_WAIT_NS.sum() + ",\"lock_acq\":" + LOCK_ACQ.sum()
                + ",\"lock_slow\":" + LOCK_SLOW.sum()
                + ",\"requests\":" + REQUESTS.sum()
                + ",\"jdk\":\"" + System.getProperty("java.version") + "\"}";
    }

    public static void main(String[] args) throws Exception {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 200;
        if (args.length > 2) {
            sleepMs = Integer.parseInt(args[2]);
        }
        if (args.length > 3) {
            holdNs = TimeUnit.MICROSECONDS.toNanos(Long.parseLong(args[3]));
        }
        if (args.length > 4) {
            cpuIters = Integer.parseInt(args[4]);
        }
        QueuedThreadPool pool = new QueuedThreadPool(threads, threads);
        pool.setName("qtp");
        Server srv = new Server(pool);
        ServerConnector conn = new ServerConnector(srv);
        conn.setHost("127.0.0.1");
        conn.setPort(port);
        conn.setAcceptQueueSize(1024);
        srv.addConnector(conn);
        ServletContextHandler ctx = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
        ctx.setContextPath("/");
        ctx.addServlet(new ServletHolder(new OffCpuServer()), "/*");
        srv.setHandler(ctx);
        server = srv;
        srv.start();
        System.out.println("READY port=" + conn.getLocalPort() + " jdk=" + System.getProperty("java.version"));
        System.out.flush();
        srv.join();
    }
}
