/** Template for ManyClasses: a class with a few methods, copied under new names. */
public class C00000 {
    int a;
    public C00000() { a = 1; }
    public int m1(int x) { return x + a; }
    public int m2(int x) { return x * a; }
    public String m3() { return "C00000"; }
}
