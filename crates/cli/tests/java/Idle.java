/** Prints "ready", then sleeps until killed (a JVM to attach to that leaves the CPU alone). */
public class Idle {
    public static void main(String[] args) throws Exception {
        System.out.println("ready");
        System.out.flush();
        while (true) Thread.sleep(60_000);
    }
}
