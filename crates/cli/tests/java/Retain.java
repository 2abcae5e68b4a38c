import java.util.ArrayList;
import java.util.List;

/**
 * Retains a known number of 4-KiB arrays at four sites (siteA..siteD keep
 * 1, 2, 3 and 4 parts of TOTAL_MB, in turns) while churnSite allocates and
 * drops as much again. Prints "TRUTH a=<bytes> b=<bytes> c=<bytes> d=<bytes>".
 * Usage: Retain TOTAL_MB
 */
public class Retain {
    static final List<byte[]> A = new ArrayList<>(), B = new ArrayList<>(), C = new ArrayList<>(), D = new ArrayList<>();
    static volatile Object sink;

    static void siteA() { A.add(new byte[4096 - 16]); }
    static void siteB() { B.add(new byte[4096 - 16]); }
    static void siteC() { C.add(new byte[4096 - 16]); }
    static void siteD() { D.add(new byte[4096 - 16]); }
    static void churnSite() { sink = new byte[4096 - 16]; }

    public static void main(String[] args) throws Exception {
        long total = Long.parseLong(args[0]) << 20;
        long rounds = total / 4096 / 10;
        for (long i = 0; i < rounds; i++) {
            siteA();
            siteB(); siteB();
            siteC(); siteC(); siteC();
            siteD(); siteD(); siteD(); siteD();
            for (int k = 0; k < 10; k++) churnSite();
            if (i % 4096 == 0) Thread.sleep(1);
        }
        System.out.println("TRUTH a=" + A.size() * 4096L + " b=" + B.size() * 4096L + " c=" + C.size() * 4096L + " d=" + D.size() * 4096L);
    }
}
