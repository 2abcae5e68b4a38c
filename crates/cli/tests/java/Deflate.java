import java.io.RandomAccessFile;
import java.util.Random;
import java.util.zip.Deflater;

/**
 * Compresses data with java.util.zip.Deflater at level 9 (CPU in libz) and
 * writes it to a file with fsync (CPU in the kernel): a fixed amount of work,
 * so the sample count does not depend on how busy the machine is.
 * Args: rounds, output file.
 */
public class Deflate {
    public static void main(String[] args) throws Exception {
        int rounds = Integer.parseInt(args[0]);
        byte[] input = new byte[1 << 19];
        Random r = new Random(42);
        for (int i = 0; i < input.length; i++) input[i] = (byte) ('a' + r.nextInt(6) + (i % 64 == 0 ? r.nextInt(20) : 0));
        byte[] out = new byte[1 << 20];
        long total = 0;
        try (RandomAccessFile file = new RandomAccessFile(args[1], "rw")) {
            for (int round = 0; round < rounds; round++) {
                Deflater d = new Deflater(9);
                d.setInput(input);
                d.finish();
                int n = 0;
                while (!d.finished()) n += d.deflate(out, n, out.length - n);
                d.end();
                total += n;
                // Rewrite the same region (the file stays small), then force it to disk.
                file.seek(0);
                for (int k = 0; k < 16; k++) file.write(out, 0, out.length);
                file.getFD().sync();
            }
        }
        System.out.println("compressed bytes: " + total);
    }
}
