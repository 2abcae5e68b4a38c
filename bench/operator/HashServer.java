// Embedded Jetty 9 server for bench/operator/attach20.py: each request hashes
// a buffer with SHA-256 (the JDK's MessageDigest, whose compress loop is a
// HotSpot intrinsic) and formats the digest, as a servlet that signs or
// checksums its payloads does. The only caller of MessageDigest in this
// program is HashServer.doGet, so every CPU sample inside SHA-256 belongs
// under it.
//
// Build: javac --release 11 -cp "$(jetty jars)" -d classes HashServer.java
// Run:   java -cp classes:$(jetty jars) HashServer [port=0] [threads=200] [kib=16] [rounds=8]
// Prints "READY port=N" once it accepts connections. GET /quit exits.

import java.io.IOException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.concurrent.atomic.LongAdder;

import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;

import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;
import org.eclipse.jetty.util.thread.QueuedThreadPool;

public final class HashServer extends HttpServlet {
    private static final long serialVersionUID = 1L;
    static int kib = 16;
    static int rounds = 8;
    static final LongAdder REQUESTS = new LongAdder();
    static volatile Server server;

    static final ThreadLocal<byte[]> BUFFER = ThreadLocal.withInitial(() -> {
        byte[] b = new byte[kib * 1024];
        for (int i = 0; i < b.length; i++) b[i] = (byte) (i * 31 + Thread.currentThread().getId());
        return b;
    });

    static byte[] hash(byte[] data, int rounds) throws NoSuchAlgorithmException {
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        byte[] d = data;
        for (int i = 0; i < rounds; i++) {
            md.update(data);
            md.update(d);
            d = md.digest();
        }
        return d;
    }

    static String hex(byte[] d) {
        StringBuilder sb = new StringBuilder(d.length * 2);
        for (byte b : d) sb.append(String.format("%02x", b));
        return sb.toString();
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        if ("/quit".equals(req.getPathInfo())) {
            resp.getWriter().println("bye");
            resp.flushBuffer();
            new Thread(() -> System.exit(0)).start();
            return;
        }
        byte[] data = BUFFER.get();
        data[(int) (REQUESTS.sum() % data.length)] ^= 1;
        String digest;
        try {
            digest = hex(hash(data, rounds));
        } catch (NoSuchAlgorithmException e) {
            throw new IOException(e);
        }
        REQUESTS.increment();
        resp.setContentType("text/plain");
        resp.getWriter().println(digest);
    }

    public static void main(String[] args) throws Exception {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 200;
        if (args.length > 2) kib = Integer.parseInt(args[2]);
        if (args.length > 3) rounds = Integer.parseInt(args[3]);
        QueuedThreadPool pool = new QueuedThreadPool(threads, threads);
        Server s = new Server(pool);
        ServerConnector c = new ServerConnector(s);
        c.setPort(port);
        s.addConnector(c);
        ServletContextHandler ctx = new ServletContextHandler();
        ctx.addServlet(new ServletHolder(new HashServer()), "/*");
        s.setHandler(ctx);
        s.start();
        server = s;
        System.out.println("READY port=" + c.getLocalPort());
        System.out.flush();
        s.join();
    }
}
