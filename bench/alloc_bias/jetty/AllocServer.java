// Embedded Jetty 9 server whose one servlet allocates a known mix per request
// at three distinct methods ("sites"), and measures each site's exact bytes
// with the thread's allocation counter. Driven by run.py (same folder).
//
// Build: javac --release 17 -cp "$(jetty jars)" -d classes AllocServer.java
// Run:   java -cp classes:$(jetty jars) AllocServer [port=0] [threads=200]
// Prints "READY port=N" on stdout once it accepts connections.
// URLs:  /        one request's worth of allocation, responds "ok"
//        /truth   exact bytes per site so far, and all live threads' bytes (JSON)
//        /quit    stops Jetty and exits the JVM with status 0 (so agents and
//                 JFR write their output)
//
// Per request: tinySite 200 x byte[32] (48 B each with header), mediumSite
// 16 x byte[512] (528 B), largeSite 8 x byte[1 KiB .. 17 KiB] (sizes from a
// per-thread LCG). References go into a per-thread ring of 256 slots, so
// escape analysis cannot remove the arrays and they die young.
//
// Truth: com.sun.management.ThreadMXBean.getCurrentThreadAllocatedBytes()
// (JDK 14+) read before and after each site call; the same pair of reads
// around an empty method (calibSite) measures the cost of a read, which is
// 0 B on 17/21/25 (reported so that a run shows it).

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.util.concurrent.atomic.LongAdder;

import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;

import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;
import org.eclipse.jetty.util.thread.QueuedThreadPool;

public final class AllocServer extends HttpServlet {
    private static final long serialVersionUID = 1L;

    static final com.sun.management.ThreadMXBean MX =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    static final LongAdder TINY = new LongAdder();
    static final LongAdder MEDIUM = new LongAdder();
    static final LongAdder LARGE = new LongAdder();
    static final LongAdder CALIB = new LongAdder();
    static final LongAdder REQUESTS = new LongAdder();
    static volatile Server server;

    static final class State {
        final Object[] ring = new Object[256];
        int pos;
        long seed;

        State() {
            seed = Thread.currentThread().getId() * 0x9E3779B97F4A7C15L + 1;
        }

        void keep(Object o) {
            ring[pos++ & 255] = o;
        }

        int nextLargeSize() {
            seed = seed * 6364136223846793005L + 1442695040888963407L;
            return 1024 + (int) ((seed >>> 33) % (16 * 1024 + 1));
        }
    }

    static final ThreadLocal<State> STATE = ThreadLocal.withInitial(State::new);

    static void tinySite(State s) {
        for (int i = 0; i < 200; i++) {
            s.keep(new byte[32]);
        }
    }

    static void mediumSite(State s) {
        for (int i = 0; i < 16; i++) {
            s.keep(new byte[512]);
        }
    }

    static void largeSite(State s) {
        for (int i = 0; i < 8; i++) {
            s.keep(new byte[s.nextLargeSize()]);
        }
    }

    static void calibSite(State s) {
        s.pos += 0;
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
        long t0 = MX.getCurrentThreadAllocatedBytes();
        tinySite(s);
        long t1 = MX.getCurrentThreadAllocatedBytes();
        mediumSite(s);
        long t2 = MX.getCurrentThreadAllocatedBytes();
        largeSite(s);
        long t3 = MX.getCurrentThreadAllocatedBytes();
        calibSite(s);
        long t4 = MX.getCurrentThreadAllocatedBytes();
        TINY.add(t1 - t0);
        MEDIUM.add(t2 - t1);
        LARGE.add(t3 - t2);
        CALIB.add(t4 - t3);
        REQUESTS.increment();
        resp.setContentType("text/plain");
        resp.getWriter().print("ok\n");
    }

    static String truthJson() {
        return "{\"tiny\":" + TINY.sum() + ",\"medium\":" + MEDIUM.sum() + ",\"large\":" + LARGE.sum()
                + ",\"calib\":" + CALIB.sum() + ",\"requests\":" + REQUESTS.sum()
                + ",\"all_threads\":" + allThreadsBytes()
                + ",\"jdk\":\"" + System.getProperty("java.version") + "\"}";
    }

    /** Bytes allocated so far by all live threads (those that ended are missed). */
    static long allThreadsBytes() {
        long sum = 0;
        for (long b : MX.getThreadAllocatedBytes(MX.getAllThreadIds())) {
            sum += Math.max(b, 0);
        }
        return sum;
    }

    public static void main(String[] args) throws Exception {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 200;
        if (!MX.isThreadAllocatedMemorySupported()) {
            throw new IllegalStateException("thread allocated memory not supported");
        }
        MX.setThreadAllocatedMemoryEnabled(true);
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
        ctx.addServlet(new ServletHolder(new AllocServer()), "/*");
        srv.setHandler(ctx);
        server = srv;
        srv.start();
        System.out.println("READY port=" + conn.getLocalPort() + " jdk=" + System.getProperty("java.version"));
        System.out.flush();
        srv.join();
    }
}
