package one.oxprof;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileReader;
import java.io.IOException;
import java.net.URISyntaxException;
import java.security.CodeSource;
import java.util.ArrayList;
import java.util.List;

/**
 * Drives the oxprof agent ({@code liboxprof.so}) from Java: the same commands
 * and options as {@code oxprof attach} (and {@code -agentpath:...=OPTIONS}),
 * in the same JVM, with the same single agent.
 *
 * <pre>{@code
 * OxProfiler p = OxProfiler.getInstance();
 * p.execute("start,event=cpu,interval=1ms,file=rec.jfr");
 * ...
 * p.execute("dump");
 * p.stop();
 * }</pre>
 *
 * <p>{@link #getInstance()} loads the library the first time: the copy the JVM
 * already runs (loaded by {@code -agentpath} or {@code oxprof attach}) if
 * there is one, else the first found of: the {@code oxprof.library} system
 * property, {@code liboxprof.so} next to this jar, {@code java.library.path}.
 * Given explicitly, {@code oxprof.library} is loaded as is: when it names
 * another file than the agent already loaded, {@code getInstance} throws
 * {@link IllegalStateException} naming the loaded one (two copies would be
 * two agents).
 *
 * <p>Errors are exceptions with the agent's one-line message: a bad option is
 * an {@link IllegalArgumentException} naming the option and what is accepted,
 * a command that cannot run now (stop while idle, a second start) an
 * {@link IllegalStateException}, and so is a command that ran but did not do
 * all that was asked (a dump to another file than the JFR file a recording
 * streams to; a profile written to a fallback file). A null argument is a
 * {@link NullPointerException} naming it. The JVM keeps running either way.
 *
 * <p>Load this class in one class loader only (the application class path):
 * the JVM binds a native library to a single class loader.
 */
public final class OxProfiler {
    /** The system property naming {@code liboxprof.so}. */
    public static final String LIBRARY_PROPERTY = "oxprof.library";
    private static final String LIBRARY_FILE = "liboxprof.so";

    private static OxProfiler instance;

    private final String libraryPath;

    private OxProfiler(String libraryPath) {
        this.libraryPath = libraryPath;
    }

    /**
     * The profiler of this JVM, loading {@code liboxprof.so} the first time
     * (see the class comment for where it is looked for).
     *
     * @throws UnsatisfiedLinkError when the library is found nowhere, or
     *     cannot be loaded
     * @throws IllegalStateException when the agent cannot run in this JVM
     *     (another copy of it is loaded, no JVMTI)
     */
    public static synchronized OxProfiler getInstance() {
        if (instance == null) {
            String path = load();
            String problem = init0();
            if (problem != null) {
                throw new IllegalStateException(problem);
            }
            instance = new OxProfiler(path);
        }
        return instance;
    }

    /**
     * Runs one agent command, as {@code oxprof attach} sends it: comma
     * separated options such as {@code start,event=cpu,interval=5ms,alloc},
     * {@code dump,file=now.html}, {@code stop}, {@code status}.
     *
     * @return the agent's reply, one line per item (what started, where a
     *     profile was written, the status line)
     * @throws IllegalArgumentException for an option the agent does not
     *     accept, with its message naming the option
     * @throws IllegalStateException when the command cannot run now, or
     *     ran but did not do all that was asked (a profile not written
     *     where asked), with the agent's message and, after it, the whole
     *     reply (what the command did do: a stop has stopped)
     * @throws NullPointerException when {@code command} is null
     */
    public String execute(String command) {
        if (command == null) {
            throw new NullPointerException("command is null");
        }
        return execute0(command);
    }

    /**
     * {@code execute("start," + options)}; {@code start("")} starts with the
     * defaults (CPU, to {@code oxprof-<pid>.html}).
     *
     * @throws NullPointerException when {@code options} is null
     */
    public String start(String options) {
        if (options == null) {
            throw new NullPointerException("options is null (start(\"\") starts with the defaults)");
        }
        return execute(options.isEmpty() ? "start" : "start," + options);
    }

    /** Stops profiling and writes the profile where the start said. */
    public String stop() {
        return execute("stop");
    }

    /**
     * Writes what was gathered so far to {@code file}, and keeps profiling.
     *
     * @throws NullPointerException when {@code file} is null ({@link #dump()}
     *     writes where the start said)
     * @throws IllegalStateException when the profile was not written to
     *     {@code file} (e.g. another {@code .jfr} file than the one a JFR
     *     recording streams to)
     */
    public String dump(String file) {
        if (file == null) {
            throw new NullPointerException("file is null (dump() writes where the start said)");
        }
        return execute("dump,file=" + file);
    }

    /** Writes what was gathered so far where the start said (flushes a JFR recording), and keeps profiling. */
    public String dump() {
        return execute("dump");
    }

    /** One line: what runs, since when, how many samples. */
    public String status() {
        return execute("status");
    }

    /** The agent's version. */
    public String getVersion() {
        return version0();
    }

    /** The file the agent was loaded from. */
    public String getLibraryPath() {
        return libraryPath;
    }

    // ---- context labels

    /**
     * Labels the samples the current thread gives while the returned context
     * is open (CPU, wall clock, allocation and lock samples alike):
     *
     * <pre>{@code
     * try (OxProfiler.Context c = OxProfiler.context("endpoint", "GET /orders")) {
     *     handle(request);
     * }
     * }</pre>
     *
     * <p>Contexts nest: an inner one adds its labels to the outer one's (a key
     * set again takes the inner value) and closing it brings the outer
     * labels back. Setting and clearing labels already seen allocates
     * nothing and costs a few nanoseconds while a recording runs, and one
     * memory read otherwise (a context opened while no recording runs
     * labels nothing, even if one starts before it closes). Keys are 1 to
     * 64 of {@code A-Z a-z 0-9 _ . : / -}; values longer than 256
     * characters are cut, ending with {@code …}. At most 4096 distinct
     * label sets exist at a time; samples of later new ones carry
     * {@code oxprof=labels over limit}. Continuous profiling ({@code loop=})
     * recycles the sets no thread uses at each interval's end, so per-request
     * labels (trace ids) work there. See docs/labels.md.
     *
     * <p>Loads the agent on first use, as {@link #getInstance()} does; when
     * it cannot be loaded, contexts do nothing. On virtual threads contexts
     * do nothing (their samples are taken on carrier threads).
     *
     * <p>A null value is the text {@code null}. A null key throws whether or
     * not a recording runs; other invalid keys are refused when the agent
     * first names a set (while a recording runs).
     *
     * @throws IllegalArgumentException for a key that is not valid (null
     *     included), naming it and the accepted form
     */
    public static Context context(String key, String value) {
        ThreadLabels.requireKey(key);
        if (!ThreadLabels.active()) {
            return Context.NONE;
        }
        return ThreadLabels.current().push(key, value, null, null);
    }

    /** {@link #context(String, String)} with two labels. */
    public static Context context(String key1, String value1, String key2, String value2) {
        ThreadLabels.requireKey(key1);
        ThreadLabels.requireKey(key2);
        if (!ThreadLabels.active()) {
            return Context.NONE;
        }
        return ThreadLabels.current().push(key1, value1, key2, value2);
    }

    /**
     * {@link #context(String, String)} with any number of labels: key,
     * value, key, value... (the array costs an allocation per call; the one-
     * and two-label forms do not).
     *
     * @throws IllegalArgumentException for a null array, an odd number of
     *     strings, or a key that is not valid (null included)
     */
    public static Context context(String... keysAndValues) {
        ThreadLabels.requirePairs(keysAndValues);
        if (!ThreadLabels.active()) {
            return Context.NONE;
        }
        return ThreadLabels.current().push(keysAndValues);
    }

    /**
     * The label sets the agent has named so far, its limit, how many
     * contexts were opened with a set refused past it (each open counts,
     * also of a set refused before), and how many sets this side has
     * cached, e.g.
     * {@code label_sets=12 limit=4096 refused=0 recycled=0 generation=0 cached=12}.
     */
    public static String labelStats() {
        return ThreadLabels.stats();
    }

    /**
     * Times an interval and names it: when the returned span is closed, a JFR
     * recording that is running gets an {@code oxprof.Span} event with its
     * start, duration, thread, {@code tag} and the thread's context labels
     * ({@code oxprof report rec.jfr --slowest-spans 10} lists the longest,
     * with what their thread did meanwhile). Without a recording, or when it
     * is not JFR, spans cost one memory read and are not kept.
     *
     * <pre>{@code
     * try (OxProfiler.Span s = OxProfiler.span("checkout " + orderId)) {
     *     checkout(order);
     * }
     * }</pre>
     */
    public static Span span(String tag) {
        if (!ThreadLabels.active()) {
            return Span.NONE;
        }
        return new Span(tag, System.nanoTime());
    }

    /** An open span ({@link #span(String)}); close it once. */
    public static final class Span implements AutoCloseable {
        static final Span NONE = new Span(null, 0);

        private final String tag;
        private final long start;
        private boolean open;

        Span(String tag, long start) {
            this.tag = tag;
            this.start = start;
            this.open = start != 0;
        }

        /** Ends the interval and hands it to the agent. */
        @Override
        public void close() {
            if (open) {
                open = false;
                span0(start, System.nanoTime(), tag);
            }
        }
    }

    /**
     * An open context of labels ({@link #context(String, String)}); close it
     * once, on the thread that opened it (try-with-resources does). Context
     * objects are reused by their thread: do not keep one after closing it.
     */
    public static final class Context implements AutoCloseable {
        /** The context that labels nothing (no recording, or no agent). */
        static final Context NONE = new Context(null);

        private final ThreadLabels owner;
        /** The label set this context wrote, and the agent's generation it was named in. */
        int id, generation;
        /** Its own labels (one or two pairs, or `more`), to name it again in a new generation. */
        String k1, v1, k2, v2;
        String[] more;
        boolean open;

        Context(ThreadLabels owner) {
            this.owner = owner;
        }

        /** Brings back the labels of before this context (see the class comment). */
        @Override
        public void close() {
            if (owner != null && open) {
                owner.close(this);
            }
        }
    }

    // ---- loading

    private static String load() {
        String explicit = System.getProperty(LIBRARY_PROPERTY);
        if (explicit != null && !explicit.isEmpty()) {
            String path = new File(explicit).getAbsolutePath();
            System.load(path);
            return path;
        }
        String mapped = loadedCopy();
        if (mapped != null) {
            System.load(mapped);
            return mapped;
        }
        List<String> tried = new ArrayList<>();
        File beside = besideJar();
        if (beside != null) {
            if (beside.isFile()) {
                System.load(beside.getAbsolutePath());
                return beside.getAbsolutePath();
            }
            tried.add(beside.getPath());
        }
        try {
            System.loadLibrary("oxprof");
        } catch (UnsatisfiedLinkError e) {
            tried.add("java.library.path (" + System.getProperty("java.library.path") + ")");
            UnsatisfiedLinkError error = new UnsatisfiedLinkError(
                    LIBRARY_FILE + " not found: set -D" + LIBRARY_PROPERTY + "=/path/to/" + LIBRARY_FILE
                            + " or put it next to the jar; tried " + String.join(", ", tried));
            error.initCause(e);
            throw error;
        }
        return mappedPath();
    }

    /** The oxprof library this process has mapped already, if any (Linux). */
    private static String loadedCopy() {
        String path = mappedPath();
        return path != null && new File(path).isFile() ? path : null;
    }

    private static String mappedPath() {
        try (BufferedReader r = new BufferedReader(new FileReader("/proc/self/maps"))) {
            for (String line; (line = r.readLine()) != null; ) {
                int slash = line.indexOf('/');
                if (slash >= 0 && line.endsWith("/" + LIBRARY_FILE)) {
                    return line.substring(slash);
                }
            }
        } catch (IOException | RuntimeException e) {
            // Not Linux, or /proc hidden: look in the usual places.
        }
        return null;
    }

    /** {@code liboxprof.so} in the directory of this class's jar (or class directory). */
    private static File besideJar() {
        try {
            CodeSource source = OxProfiler.class.getProtectionDomain().getCodeSource();
            if (source == null || source.getLocation() == null) {
                return null;
            }
            File location = new File(source.getLocation().toURI());
            File dir = location.isDirectory() ? location : location.getParentFile();
            return dir == null ? null : new File(dir, LIBRARY_FILE);
        } catch (URISyntaxException | RuntimeException e) {
            return null;
        }
    }

    // ---- the agent's side (liboxprof.so)

    /** Null when the agent runs in this JVM, else why not. */
    private static native String init0();

    private static native String execute0(String command);

    private static native String version0();

    private static native void span0(long startNanos, long endNanos, String tag);
}
