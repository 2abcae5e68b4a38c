import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.security.MessageDigest;
import java.util.Random;
import java.util.zip.CRC32;
import java.util.zip.Deflater;
import java.util.zip.Inflater;

/**
 * Native code under the profiler (with tests/c/native_sweep.c, loaded from the
 * directory given first): each phase named on the command line burns about
 * MS milliseconds of CPU in native code of its own and the program prints what
 * each used, measured by the native code itself (CLOCK_THREAD_CPUTIME_ID) or
 * by ThreadMXBean, as `TRUTH phase=ms ...`.
 *
 * Usage: NativeSweep DIR MS PHASE...  where PHASE is burn, deep (recursion
 * DEEP frames deep, property ns.depth, default 40), callback (native ->
 * Java -> native), dl:LIB:PREFIX (dlopen DIR/LIB, call PREFIX_outer),
 * dlclose:LIB:PREFIX (the same, then dlclose), threads (2 attached native
 * threads and one unattached), sys (reads of /dev/zero: kernel time), block
 * (pipe read, nanosleep, futex wait: no CPU; block_pipe, block_sleep,
 * block_futex: one of them, its wall time printed as PHASE_wall), inflate, crc, digest, fileio.
 */
public class NativeSweep {
    static native long burn(long ns);
    static native long recurse(int depth, long ns);
    static native long callback(long ns);
    static native long inner(long ns);
    static native long dl(String path, String sym, long ns, boolean close);
    static native void threads(int attached, long ns, long[] out);
    static native long sys(long ns);
    static native long block(int ms);
    static native long blockOne(int which, int ms);

    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();

    /** Called from native code (ns_cb_outer): Java between two native frames. */
    static long javaMiddle(long ns) {
        return inner(ns);
    }

    static volatile long sink;

    static long inflateLoop(long ns) throws Exception {
        byte[] plain = new byte[1 << 20];
        Random r = new Random(1);
        for (int i = 0; i < plain.length; i++) plain[i] = (byte) ('a' + r.nextInt(4));
        Deflater d = new Deflater();
        d.setInput(plain);
        d.finish();
        byte[] packed = new byte[plain.length];
        int n = d.deflate(packed);
        d.end();
        byte[] out = new byte[plain.length];
        long t0 = MX.getCurrentThreadCpuTime();
        while (MX.getCurrentThreadCpuTime() - t0 < ns) {
            Inflater inf = new Inflater();
            inf.setInput(packed, 0, n);
            sink += inf.inflate(out);
            inf.end();
        }
        return MX.getCurrentThreadCpuTime() - t0;
    }

    static long crcLoop(long ns) {
        byte[] data = new byte[1 << 20];
        new Random(2).nextBytes(data);
        CRC32 c = new CRC32();
        long t0 = MX.getCurrentThreadCpuTime();
        while (MX.getCurrentThreadCpuTime() - t0 < ns) {
            for (int i = 0; i < 8; i++) c.update(data, 0, data.length);
            sink += c.getValue();
        }
        return MX.getCurrentThreadCpuTime() - t0;
    }

    static long digestLoop(long ns) throws Exception {
        byte[] data = new byte[1 << 20];
        new Random(3).nextBytes(data);
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        long t0 = MX.getCurrentThreadCpuTime();
        while (MX.getCurrentThreadCpuTime() - t0 < ns) {
            sink += md.digest(data)[0];
        }
        return MX.getCurrentThreadCpuTime() - t0;
    }

    static long fileLoop(String dir, long ns) throws Exception {
        File f = new File(dir, "ns-io.bin");
        byte[] data = new byte[1 << 16];
        long t0 = MX.getCurrentThreadCpuTime();
        while (MX.getCurrentThreadCpuTime() - t0 < ns) {
            try (FileOutputStream o = new FileOutputStream(f)) {
                for (int i = 0; i < 32; i++) o.write(data);
            }
            try (FileInputStream in = new FileInputStream(f)) {
                while (in.read(data) > 0) sink++;
            }
        }
        long used = MX.getCurrentThreadCpuTime() - t0;
        f.delete();
        return used;
    }

    public static void main(String[] args) throws Exception {
        String dir = args[0];
        long ns = Long.parseLong(args[1]) * 1_000_000L;
        System.load(new File(dir, "libnative_sweep.so").getAbsolutePath());
        int depth = Integer.getInteger("ns.depth", 40);
        StringBuilder truth = new StringBuilder("TRUTH");
        long total = 0;
        for (int i = 2; i < args.length; i++) {
            String p = args[i];
            long t0 = MX.getCurrentThreadCpuTime();
            String key = p;
            long used;
            if (p.equals("burn")) {
                used = burn(ns);
            } else if (p.equals("deep")) {
                used = recurse(depth, ns);
            } else if (p.equals("callback")) {
                used = callback(ns);
            } else if (p.startsWith("dl:") || p.startsWith("dlclose:")) {
                String[] f = p.split(":");
                key = f[2];
                used = dl(new File(dir, f[1]).getAbsolutePath(), f[2] + "_outer", ns, f[0].equals("dlclose"));
                if (used < 0) throw new IllegalStateException("dlopen/dlsym failed: " + p);
            } else if (p.equals("threads")) {
                long[] out = new long[2];
                threads(2, ns, out);
                truth.append(" raw=").append(out[1] / 1_000_000.0);
                total += out[1];
                used = out[0];
            } else if (p.equals("sys")) {
                used = sys(ns);
            } else if (p.equals("block")) {
                long wall = block((int) (ns / 1_000_000L));
                truth.append(" block_wall=").append(wall / 1_000_000.0);
                used = MX.getCurrentThreadCpuTime() - t0;
            } else if (p.startsWith("block_")) {
                int which = p.equals("block_pipe") ? 0 : p.equals("block_sleep") ? 1 : 2;
                long wall = blockOne(which, (int) (ns / 1_000_000L));
                truth.append(' ').append(p).append("_wall=").append(wall / 1_000_000.0);
                used = MX.getCurrentThreadCpuTime() - t0;
            } else if (p.equals("inflate")) {
                used = inflateLoop(ns);
            } else if (p.equals("crc")) {
                used = crcLoop(ns);
            } else if (p.equals("digest")) {
                used = digestLoop(ns);
            } else if (p.equals("fileio")) {
                used = fileLoop(dir, ns);
            } else {
                throw new IllegalArgumentException("unknown phase " + p);
            }
            long phaseCpu = MX.getCurrentThreadCpuTime() - t0;
            truth.append(' ').append(key).append('=').append(used / 1_000_000.0);
            if (!p.equals("threads")) truth.append(' ').append(key).append("_thread=").append(phaseCpu / 1_000_000.0);
            total += used;
        }
        truth.append(" total=").append(total / 1_000_000.0);
        System.out.println(truth);
    }
}
