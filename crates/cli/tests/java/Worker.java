import java.util.function.LongUnaryOperator;

/** Loaded again and again by throw-away class loaders (see Unload). */
public class Worker implements LongUnaryOperator {
    public long applyAsLong(long n) {
        return spin(n);
    }

    static long spin(long n) {
        long s = 0;
        for (long i = 0; i < n; i++) s += (i * 31) ^ (s >>> 3);
        return s;
    }
}
