package one.oxprof;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * One thread's context labels (see {@link OxProfiler#context(String, String)}
 * and docs/labels.md): the thread's slot in the agent (a direct buffer over
 * the 32-bit word the signal handler reads), the id of the label set now in
 * it, and the stack of open contexts.
 *
 * <p>A label set is named by the agent once ({@link #intern0}); the ids are
 * kept in a map shared by all threads, looked up with a per-thread probe
 * key, so setting and clearing labels already named allocates nothing and
 * makes no call into the agent: a map lookup and a 4-byte write.
 */
final class ThreadLabels {
    /** The agent's limits (crates/profile/src/labels.rs). */
    static final int MAX_SETS = 4096;
    static final int MAX_KEY_CHARS = 64;
    static final int MAX_VALUE_CHARS = 256;
    static final int OVER_LIMIT = 1;
    static final String RESERVED_KEY = "oxprof";

    /**
     * Two ints: 1 while a recording runs, and the agent's label-set
     * generation (ids cached in an older one are stale: see
     * crates/agent/src/labels.rs); null when the agent is not available.
     */
    private static volatile ByteBuffer ACTIVE;
    private static volatile String UNAVAILABLE;
    /**
     * Contexts opened while the agent could not be loaded, and when loading
     * it was last tried (System.nanoTime): an agent that was not there at
     * the first context may come later (`oxprof attach PID start` into a
     * service that ships only oxprof.jar), so loading is tried again, at
     * most once a second and every {@link #RETRY_EVERY} contexts.
     */
    private static int missed;
    private static volatile long lastTry;
    private static final int RETRY_EVERY = 64;
    private static final long RETRY_NANOS = 1_000_000_000L;
    private static final MethodHandle IS_VIRTUAL;
    /** (parent set, labels) → generation << 32 | set id. */
    private static final ConcurrentHashMap<Key, Long> IDS = new ConcurrentHashMap<>();
    /** The generation the map was last emptied in. */
    private static volatile int idsGeneration;
    /** The generation in which the agent refused a set (it holds MAX_SETS: every new set is over the limit until it recycles). */
    private static volatile int fullGeneration = -1;

    /** Contexts opened with the over-limit set (labelStats' refused=). */
    private static final LongAdder REFUSED = new LongAdder();

    /** A platform thread's labels, made on its first context. */
    private static final ThreadLocal<ThreadLabels> CURRENT = ThreadLocal.withInitial(() -> new ThreadLabels(true));
    /**
     * What every virtual thread gets: no slot, so contexts do nothing (their
     * samples are taken on a carrier), and nothing made or kept per virtual
     * thread, which may live for one request.
     */
    private static final ThreadLabels NONE = new ThreadLabels(false);

    static {
        lastTry = System.nanoTime();
        load();
        MethodHandle isVirtual = null;
        try {
            isVirtual = MethodHandles.publicLookup().findVirtual(Thread.class, "isVirtual", MethodType.methodType(boolean.class));
        } catch (ReflectiveOperationException e) {
            // Before JDK 21: no virtual threads.
        }
        IS_VIRTUAL = isVirtual;
    }

    /** Loads the agent (as {@link OxProfiler#getInstance()}) and takes its flag words, or says why not. */
    private static synchronized void load() {
        if (ACTIVE != null) {
            return;
        }
        ByteBuffer active = null;
        String why = null;
        try {
            OxProfiler.getInstance();
            active = activeFlag0();
            if (active == null) {
                why = "the agent gave no flag";
            }
        } catch (RuntimeException | LinkageError e) {
            why = e.toString();
        }
        UNAVAILABLE = why;
        if (active != null) {
            ACTIVE = active.order(ByteOrder.nativeOrder());
        }
    }

    /**
     * Whether the agent, unavailable so far, could be loaded now: tried at
     * most once a second, on every {@link #RETRY_EVERY}th call (a racy
     * count: an approximate rate is all it sets).
     */
    private static boolean retried(boolean counted) {
        if (counted && (++missed & (RETRY_EVERY - 1)) != 0) {
            return false;
        }
        long now = System.nanoTime();
        if (now - lastTry < RETRY_NANOS) {
            return false;
        }
        lastTry = now;
        load();
        return ACTIVE != null;
    }

    /** The agent's label-set generation. */
    private static int generation() {
        return ACTIVE.getInt(4);
    }

    /** Whether a recording runs (labels are set only then). */
    static boolean active() {
        ByteBuffer a = ACTIVE;
        if (a == null) {
            if (!retried(true)) {
                return false;
            }
            a = ACTIVE;
        }
        return a.getInt(0) != 0;
    }

    /** The agent's count of label sets, the limit, and this side's cache. */
    static String stats() {
        if (ACTIVE == null && !retried(false)) {
            return "labels unavailable: " + UNAVAILABLE;
        }
        return stats0(REFUSED.sum()) + " cached=" + IDS.size();
    }

    private final ByteBuffer slot;
    private final Key probe = new Key();
    /**
     * This thread's recent label sets, direct-mapped by the strings' hash
     * codes and matched by identity (the same String objects, as literals
     * and reused values are): most contexts are found here without
     * touching the shared map.
     */
    private final int[] recentParent = new int[RECENT];
    private final String[] recentK1 = new String[RECENT], recentV1 = new String[RECENT], recentK2 = new String[RECENT], recentV2 = new String[RECENT];
    private final int[] recentId = new int[RECENT];
    private final int[] recentGeneration = new int[RECENT];
    private static final int RECENT = 64;
    private OxProfiler.Context[] stack = new OxProfiler.Context[8];
    private int depth;
    private int current;

    private ThreadLabels(boolean register) {
        ByteBuffer s = register ? registerThread0() : null;
        slot = s == null ? null : s.order(ByteOrder.nativeOrder());
    }

    /** The current thread's labels: a virtual thread's are {@link #NONE}. */
    static ThreadLabels current() {
        return isVirtual(Thread.currentThread()) ? NONE : CURRENT.get();
    }

    private static boolean isVirtual(Thread t) {
        if (IS_VIRTUAL == null) {
            return false;
        }
        try {
            return (boolean) IS_VIRTUAL.invokeExact(t);
        } catch (Throwable e) {
            return true;
        }
    }

    /** Opens a context with one or two labels (k2 null: one). */
    OxProfiler.Context push(String k1, String v1, String k2, String v2) {
        if (slot == null) {
            return OxProfiler.Context.NONE;
        }
        int g = generation();
        if (depth > 0 && stack[depth - 1].generation != g) {
            refresh(g);
        }
        int parent = current;
        int h = k1.hashCode() * 31 + (v1 == null ? 0 : v1.hashCode()) + parent;
        if (k2 != null) {
            h = h * 31 + k2.hashCode() * 7 + (v2 == null ? 0 : v2.hashCode());
        }
        int i = (h ^ (h >>> 16)) & (RECENT - 1);
        if (recentK1[i] == k1 && recentV1[i] == v1 && recentK2[i] == k2 && recentV2[i] == v2 && recentParent[i] == parent && recentK1[i] != null
                && recentGeneration[i] == g) {
            return open(recentId[i], g, k1, v1, k2, v2, null);
        }
        probe.set(parent, k1, v1, k2, v2, null);
        int id = lookup(g);
        recentParent[i] = parent;
        recentK1[i] = k1;
        recentV1[i] = v1;
        recentK2[i] = k2;
        recentV2[i] = v2;
        recentId[i] = id;
        recentGeneration[i] = g;
        return open(id, g, k1, v1, k2, v2, null);
    }

    /** Opens a context with any number of labels (key, value, key, value...). */
    OxProfiler.Context push(String[] keysAndValues) {
        if (slot == null || keysAndValues.length == 0) {
            return OxProfiler.Context.NONE;
        }
        if (keysAndValues.length <= 4) {
            String k2 = keysAndValues.length == 4 ? keysAndValues[2] : null;
            String v2 = keysAndValues.length == 4 ? keysAndValues[3] : null;
            return push(keysAndValues[0], keysAndValues[1], k2, v2);
        }
        int g = generation();
        if (depth > 0 && stack[depth - 1].generation != g) {
            refresh(g);
        }
        String[] more = keysAndValues.clone();
        probe.set(current, null, null, null, null, more);
        return open(lookup(g), g, null, null, null, null, more);
    }

    /** The id of the set `probe` names, in generation `g`. */
    private int lookup(int g) {
        if (idsGeneration != g) {
            IDS.clear();
            idsGeneration = g;
        }
        Long known = IDS.get(probe);
        if (known != null && (int) (known >>> 32) == g) {
            return (int) known.longValue();
        }
        probe.check();
        if (fullGeneration == g) {
            return OVER_LIMIT;
        }
        int named = intern0(probe.parent, probe.pairs());
        if (named == OVER_LIMIT) {
            fullGeneration = g;
        } else if (IDS.size() < 2 * MAX_SETS) {
            IDS.put(probe.copy(), ((long) g << 32) | (named & 0xffffffffL));
        }
        return named;
    }

    /**
     * Names this thread's open contexts again, outermost first, after the
     * agent recycled label-set ids (continuous profiling): the ids they
     * got in an older generation may be given to other sets.
     */
    private void refresh(int g) {
        int parent = 0;
        for (int i = 0; i < depth; i++) {
            OxProfiler.Context c = stack[i];
            if (c.generation != g) {
                probe.set(parent, c.k1, c.v1, c.k2, c.v2, c.more);
                c.id = lookup(g);
                c.generation = g;
            }
            parent = c.id;
        }
        if (depth > 0) {
            set(stack[depth - 1].id);
        }
    }

    private OxProfiler.Context open(int id, int g, String k1, String v1, String k2, String v2, String[] more) {
        if (depth == stack.length) {
            stack = java.util.Arrays.copyOf(stack, 2 * depth);
        }
        OxProfiler.Context c = stack[depth];
        if (c == null) {
            c = stack[depth] = new OxProfiler.Context(this);
        }
        c.id = id;
        c.generation = g;
        c.k1 = k1;
        c.v1 = v1;
        c.k2 = k2;
        c.v2 = v2;
        c.more = more;
        c.open = true;
        depth++;
        if (id == OVER_LIMIT) {
            REFUSED.increment();
        }
        set(id);
        return c;
    }

    /** Closes `c`: the labels before it come back once every context opened after it is closed too. */
    void close(OxProfiler.Context c) {
        c.open = false;
        if (depth == 0 || stack[depth - 1] != c) {
            return; // closed out of order: it goes when those above it do
        }
        depth--;
        while (depth > 0 && !stack[depth - 1].open) {
            depth--;
        }
        if (depth == 0) {
            set(0);
            return;
        }
        int g = generation();
        if (stack[depth - 1].generation != g) {
            refresh(g);
        }
        set(stack[depth - 1].id);
    }

    private void set(int id) {
        current = id;
        slot.putInt(0, id);
    }

    /** A label set's name in the ids map: the parent set and the labels. */
    private static final class Key {
        int parent;
        String k1, v1, k2, v2;
        String[] more;
        int hash;

        void set(int parent, String k1, String v1, String k2, String v2, String[] more) {
            this.parent = parent;
            this.more = more;
            if (more != null) {
                for (int i = 0; i < more.length; i += 2) {
                    more[i + 1] = bounded(more[i + 1]);
                }
                this.k1 = this.v1 = this.k2 = this.v2 = null;
                hash = 31 * parent + java.util.Arrays.hashCode(more);
                return;
            }
            this.k1 = k1;
            this.v1 = bounded(v1);
            this.k2 = k2;
            this.v2 = k2 == null ? null : bounded(v2);
            int h = 31 * parent + k1.hashCode();
            h = 31 * h + this.v1.hashCode();
            if (k2 != null) {
                h = 31 * h + k2.hashCode();
                h = 31 * h + this.v2.hashCode();
            }
            hash = h;
        }

        /** Throws IllegalArgumentException for a key the agent refuses. */
        void check() {
            if (more != null) {
                for (int i = 0; i < more.length; i += 2) {
                    checkKey(more[i]);
                }
            } else {
                checkKey(k1);
                if (k2 != null) {
                    checkKey(k2);
                }
            }
        }

        String[] pairs() {
            if (more != null) {
                return more;
            }
            return k2 == null ? new String[] {k1, v1} : new String[] {k1, v1, k2, v2};
        }

        Key copy() {
            Key k = new Key();
            k.parent = parent;
            k.k1 = k1;
            k.v1 = v1;
            k.k2 = k2;
            k.v2 = v2;
            k.more = more;
            k.hash = hash;
            return k;
        }

        @Override
        public int hashCode() {
            return hash;
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Key)) {
                return false;
            }
            Key k = (Key) o;
            return hash == k.hash && parent == k.parent && eq(k1, k.k1) && eq(v1, k.v1) && eq(k2, k.k2) && eq(v2, k.v2)
                    && java.util.Arrays.equals(more, k.more);
        }

        private static boolean eq(String a, String b) {
            return a == b || (a != null && a.equals(b));
        }
    }

    /** A value cut at MAX_VALUE_CHARS code points, visibly (as the agent cuts it). */
    static String bounded(String v) {
        if (v == null) {
            return "null";
        }
        if (v.length() <= MAX_VALUE_CHARS || v.codePointCount(0, v.length()) <= MAX_VALUE_CHARS) {
            return v;
        }
        return v.substring(0, v.offsetByCodePoints(0, MAX_VALUE_CHARS)) + "\u2026";
    }

    private static final String KEY_FORM = "1 to " + MAX_KEY_CHARS + " of A-Z a-z 0-9 _ . : / - (and not '" + RESERVED_KEY + "')";

    /** Throws IllegalArgumentException for a null key (checked on every call: a null compare). */
    static void requireKey(String k) {
        if (k == null) {
            throw new IllegalArgumentException("a label key is null: keys are " + KEY_FORM);
        }
    }

    /** Throws IllegalArgumentException unless `keysAndValues` is key, value pairs with no null key. */
    static void requirePairs(String[] keysAndValues) {
        if (keysAndValues == null) {
            throw new IllegalArgumentException("the labels array is null: give key, value pairs");
        }
        if ((keysAndValues.length & 1) != 0) {
            throw new IllegalArgumentException("labels come in key, value pairs; got " + keysAndValues.length + " strings");
        }
        for (int i = 0; i < keysAndValues.length; i += 2) {
            requireKey(keysAndValues[i]);
        }
    }

    static void checkKey(String k) {
        requireKey(k);
        boolean ok = !k.isEmpty() && k.length() <= MAX_KEY_CHARS && !k.equals(RESERVED_KEY);
        for (int i = 0; ok && i < k.length(); i++) {
            char c = k.charAt(i);
            ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || "_.:/-".indexOf(c) >= 0;
        }
        if (!ok) {
            throw new IllegalArgumentException("'" + k + "' is not a label key: " + KEY_FORM);
        }
    }

    private static native ByteBuffer activeFlag0();

    private static native ByteBuffer registerThread0();

    private static native int intern0(int parent, String[] keysAndValues);

    private static native String stats0(long refusedOpens);
}
