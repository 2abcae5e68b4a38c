/** A JVM to attach to: says "ready" once main runs, then sleeps (default 120 s). */
public class Sleeper {
    public static void main(String[] args) throws Exception {
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(args.length > 0 ? Long.parseLong(args[0]) * 1000 : 120_000);
    }
}
