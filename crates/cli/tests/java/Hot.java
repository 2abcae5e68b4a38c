/** Two known hot methods, called from main for a given number of seconds. */
public class Hot {
    static volatile double sink;

    static double sqrtSin(int n) {
        double s = 0;
        for (int i = 0; i < n; i++) s += Math.sqrt(i) * Math.sin(i);
        return s;
    }

    static double logs(int n) {
        double s = 0;
        for (int i = 0; i < n; i++) s += Math.log(i + 1);
        return s;
    }

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 2;
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (System.nanoTime() < end) {
            sink += sqrtSin(50_000);
            sink += logs(50_000);
        }
        System.out.println("done");
        if (args.length > 1 && args[1].equals("exit3")) System.exit(3);
    }
}
