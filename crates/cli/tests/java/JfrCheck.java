import java.nio.file.Paths;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedMethod;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordingFile;

/**
 * Reads a JFR file with the JDK's own jdk.jfr.consumer.RecordingFile and
 * prints what it found, one fact per line:
 *   COUNT <event type> <n>
 *   CPU <n> <stack>          (ExecutionSample stacks, root first, ';'-joined Class.method)
 *   ALLOC <n> <stack;class>  (ObjectAllocationSample stacks with the allocated class as leaf)
 *   WEIGHT <sum of ObjectAllocationSample weights>
 *   LINE <Class.method> <first line number seen>
 *   FRAMETYPE <type> <n>
 *   THREAD <java or OS thread name> <n>
 *   SETTING <name>=<value>
 * Usage: JfrCheck FILE
 */
public class JfrCheck {
    static final Map<String, Long> counts = new TreeMap<>(), cpu = new TreeMap<>(), alloc = new TreeMap<>(), types = new TreeMap<>(), threads = new TreeMap<>();
    static final Map<String, Integer> lines = new TreeMap<>();
    static final Map<String, String> settings = new TreeMap<>();

    public static void main(String[] args) throws Exception {
        long weight = 0;
        for (RecordedEvent e : RecordingFile.readAllEvents(Paths.get(args[0]))) {
            String type = e.getEventType().getName();
            counts.merge(type, 1L, Long::sum);
            if (type.equals("jdk.ExecutionSample")) {
                cpu.merge(stack(e.getStackTrace()), 1L, Long::sum);
                String t = e.getThread("sampledThread").getJavaName();
                threads.merge(t != null ? t : e.getThread("sampledThread").getOSName(), 1L, Long::sum);
            } else if (type.equals("jdk.ObjectAllocationSample")) {
                alloc.merge(stack(e.getStackTrace()) + ";" + e.getClass("objectClass").getName(), 1L, Long::sum);
                weight += e.getLong("weight");
            } else if (type.equals("jdk.ActiveSetting")) {
                settings.put(e.getString("name"), e.getString("value"));
            }
        }
        counts.forEach((k, v) -> System.out.println("COUNT " + k + " " + v));
        cpu.forEach((k, v) -> System.out.println("CPU " + v + " " + k));
        alloc.forEach((k, v) -> System.out.println("ALLOC " + v + " " + k));
        System.out.println("WEIGHT " + weight);
        lines.forEach((k, v) -> System.out.println("LINE " + k + " " + v));
        types.forEach((k, v) -> System.out.println("FRAMETYPE " + k + " " + v));
        threads.forEach((k, v) -> System.out.println("THREAD " + k + " " + v));
        settings.forEach((k, v) -> System.out.println("SETTING " + k + "=" + v));
    }

    static String stack(RecordedStackTrace st) {
        List<RecordedFrame> frames = st.getFrames();
        StringBuilder sb = new StringBuilder();
        for (int i = frames.size() - 1; i >= 0; i--) {
            RecordedFrame f = frames.get(i);
            RecordedMethod m = f.getMethod();
            String cls = m.getType().getName();
            String name = cls.isEmpty() ? m.getName() : cls + "." + m.getName();
            if (sb.length() > 0) sb.append(';');
            sb.append(name);
            types.merge(String.valueOf(f.getType()), 1L, Long::sum);
            if (f.getLineNumber() > 0) lines.putIfAbsent(name, f.getLineNumber());
        }
        return sb.toString();
    }
}
