import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.security.ProtectionDomain;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.FieldVisitor;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;

/**
 * A java.lang.instrument agent that rewrites one class with ASM as it loads,
 * the way coverage, APM and tracing agents do: every method but the static
 * initialiser gets {@code $entries += 1} inserted at its entry (8 bytes of
 * bytecode: every later bytecode index moves), and the class gets a
 * {@code public static long $entries} field to count in. The line number
 * tables go through ASM's labels, so they follow the moved code.
 *
 * Usage: -javaagent:entry-counter.jar=CLASS (with ASM on the class path).
 * {@link #retransform} has the JVM run the rewrite again on the loaded
 * class (retransformation starts from the class file as it was loaded, so
 * the same field is added again and the class's shape does not change).
 */
public class EntryCounter implements ClassFileTransformer {
    static Instrumentation inst;
    static volatile int rewrites;
    final String target;

    EntryCounter(String target) {
        this.target = target;
    }

    public static void premain(String args, Instrumentation instrumentation) {
        inst = instrumentation;
        instrumentation.addTransformer(new EntryCounter(args.replace('.', '/')), true);
    }

    /** Retransforms {@code c} (which runs {@link #transform} on it again). */
    public static void retransform(Class<?> c) throws Exception {
        inst.retransformClasses(c);
    }

    /** How many times the class was rewritten. */
    public static int rewrites() {
        return rewrites;
    }

    @Override
    public byte[] transform(ClassLoader loader, String className, Class<?> redefined, ProtectionDomain domain, byte[] bytes) {
        if (!target.equals(className)) return null;
        try {
            ClassReader reader = new ClassReader(bytes);
            ClassWriter writer = new ClassWriter(reader, ClassWriter.COMPUTE_MAXS);
            reader.accept(new ClassVisitor(Opcodes.ASM9, writer) {
                boolean hasField;

                @Override
                public FieldVisitor visitField(int access, String name, String descriptor, String signature, Object value) {
                    hasField |= name.equals("$entries");
                    return super.visitField(access, name, descriptor, signature, value);
                }

                @Override
                public MethodVisitor visitMethod(int access, String name, String descriptor, String signature, String[] exceptions) {
                    MethodVisitor mv = super.visitMethod(access, name, descriptor, signature, exceptions);
                    if (name.equals("<clinit>") || (access & (Opcodes.ACC_ABSTRACT | Opcodes.ACC_NATIVE)) != 0) return mv;
                    return new MethodVisitor(Opcodes.ASM9, mv) {
                        @Override
                        public void visitCode() {
                            super.visitCode();
                            super.visitFieldInsn(Opcodes.GETSTATIC, className, "$entries", "J");
                            super.visitInsn(Opcodes.LCONST_1);
                            super.visitInsn(Opcodes.LADD);
                            super.visitFieldInsn(Opcodes.PUTSTATIC, className, "$entries", "J");
                        }
                    };
                }

                @Override
                public void visitEnd() {
                    if (!hasField) super.visitField(Opcodes.ACC_PUBLIC | Opcodes.ACC_STATIC, "$entries", "J", null, null).visitEnd();
                    super.visitEnd();
                }
            }, 0);
            byte[] out = writer.toByteArray();
            rewrites++;
            return out;
        } catch (Throwable t) {
            // The JVM ignores a transformer's exception: say so, or a broken
            // rewrite would pass for one that never ran.
            System.err.println("EntryCounter: cannot rewrite " + className + ": " + t);
            t.printStackTrace();
            return null;
        }
    }
}
