/** Defined again and again by Soak's one-shot class loaders (class churn). */
public class Churned {
    public static long run(int n) {
        long s = 0;
        for (int i = 0; i < 10_000; i++) s += (i ^ n) % 7;
        return s;
    }
}
