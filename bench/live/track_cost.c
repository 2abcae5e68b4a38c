/*
 * Measures the two ways an agent can learn that a sampled object died, on
 * the same program, so oxprof's choice (crates/agent/src/heap/live.rs) rests on
 * figures. Load with -agentpath:./track_cost.so=weak|tag[,INTERVAL].
 *
 *   weak: SampledObjectAlloc makes a JNI weak global reference; an agent
 *         thread woken after each GC sweeps them with IsSameObject(ref, NULL).
 *   tag:  SampledObjectAlloc sets a JVMTI tag; the ObjectFree event reports
 *         each death.
 *
 * Prints at VM death: the mean cost of the tracking call in the callback,
 * deaths seen, and when they are seen relative to the GC that freed them:
 * for tags, how many ObjectFree events ran inside a GC pause (between
 * GarbageCollectionStart and Finish) and the mean delay after the pause
 * for those that did not; for weak references, the sweep cost per entry
 * and the mean delay from the end of the GC to the end of its sweep.
 * Build: bench/live/track_cost.sh (gcc, the JDK's include directory).
 */
#include <jvmti.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static jvmtiEnv *jvmti;
static int mode_tag;
static jrawMonitorID lock, wake;
static jweak *refs;
static long nrefs, cap;
static atomic_long track_ns, tracked, deaths, in_pause, after_delay_ns, after_n;
static atomic_long gc_running, gcs, gc_end_ns;
static long sweep_ns, swept, sweep_delay_ns, sweeps;

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void JNICALL on_alloc(jvmtiEnv *j, JNIEnv *env, jthread th, jobject o, jclass k, jlong size) {
    long t0 = now_ns();
    if (mode_tag) {
        (*j)->SetTag(j, o, 1);
    } else {
        jweak w = (*env)->NewWeakGlobalRef(env, o);
        (*j)->RawMonitorEnter(j, lock);
        if (nrefs == cap) {
            cap = cap ? cap * 2 : 65536;
            refs = realloc(refs, cap * sizeof(jweak));
        }
        refs[nrefs++] = w;
        (*j)->RawMonitorExit(j, lock);
    }
    atomic_fetch_add(&track_ns, now_ns() - t0);
    atomic_fetch_add(&tracked, 1);
}

static void JNICALL on_free(jvmtiEnv *j, jlong tag) {
    atomic_fetch_add(&deaths, 1);
    if (atomic_load(&gc_running)) {
        atomic_fetch_add(&in_pause, 1);
    } else {
        atomic_fetch_add(&after_delay_ns, now_ns() - atomic_load(&gc_end_ns));
        atomic_fetch_add(&after_n, 1);
    }
}

static void JNICALL on_gc_start(jvmtiEnv *j) { atomic_store(&gc_running, 1); }

static void JNICALL on_gc_finish(jvmtiEnv *j) {
    atomic_store(&gc_running, 0);
    atomic_store(&gc_end_ns, now_ns());
    atomic_fetch_add(&gcs, 1);
    if (!mode_tag) {
        (*j)->RawMonitorEnter(j, wake);
        (*j)->RawMonitorNotify(j, wake);
        (*j)->RawMonitorExit(j, wake);
    }
}

static void JNICALL sweeper(jvmtiEnv *j, JNIEnv *env, void *arg) {
    for (;;) {
        (*j)->RawMonitorEnter(j, wake);
        (*j)->RawMonitorWait(j, wake, 0);
        (*j)->RawMonitorExit(j, wake);
        long t0 = now_ns(), end = atomic_load(&gc_end_ns);
        (*j)->RawMonitorEnter(j, lock);
        long kept = 0, n = nrefs;
        for (long i = 0; i < nrefs; i++) {
            if ((*env)->IsSameObject(env, refs[i], NULL)) {
                (*env)->DeleteWeakGlobalRef(env, refs[i]);
                atomic_fetch_add(&deaths, 1);
            } else {
                refs[kept++] = refs[i];
            }
        }
        nrefs = kept;
        (*j)->RawMonitorExit(j, lock);
        long t1 = now_ns();
        sweep_ns += t1 - t0;
        swept += n;
        sweep_delay_ns += t1 - end;
        sweeps++;
    }
}

static void JNICALL on_vm_init(jvmtiEnv *j, JNIEnv *env, jthread th) {
    if (mode_tag) return;
    jclass tc = (*env)->FindClass(env, "java/lang/Thread");
    jmethodID init = (*env)->GetMethodID(env, tc, "<init>", "()V");
    jthread t = (*env)->NewObject(env, tc, init);
    (*j)->RunAgentThread(j, t, sweeper, NULL, JVMTI_THREAD_NORM_PRIORITY);
}

static void JNICALL on_vm_death(jvmtiEnv *j, JNIEnv *env) {
    long n = atomic_load(&tracked);
    printf("RESULT mode=%s tracked=%ld track_ns=%.0f deaths=%ld gcs=%ld", mode_tag ? "tag" : "weak", n, n ? (double)atomic_load(&track_ns) / n : 0.0, atomic_load(&deaths), atomic_load(&gcs));
    if (mode_tag) {
        long a = atomic_load(&after_n);
        printf(" free_in_gc_pause=%ld free_after_pause=%ld mean_delay_after_pause_us=%.0f\n", atomic_load(&in_pause), a, a ? atomic_load(&after_delay_ns) / 1000.0 / a : 0.0);
    } else {
        printf(" sweeps=%ld sweep_ns_per_entry=%.1f mean_sweep_done_after_gc_us=%.0f\n", sweeps, swept ? (double)sweep_ns / swept : 0.0, sweeps ? sweep_delay_ns / 1000.0 / sweeps : 0.0);
    }
    fflush(stdout);
}

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved) {
    mode_tag = options && strncmp(options, "tag", 3) == 0;
    const char *comma = options ? strchr(options, ',') : NULL;
    jint interval = comma ? atoi(comma + 1) : 16384;
    if ((*vm)->GetEnv(vm, (void **)&jvmti, JVMTI_VERSION_11) != JNI_OK) return JNI_ERR;
    jvmtiCapabilities caps;
    memset(&caps, 0, sizeof caps);
    caps.can_generate_sampled_object_alloc_events = 1;
    caps.can_generate_garbage_collection_events = 1;
    caps.can_tag_objects = 1;
    caps.can_generate_object_free_events = 1;
    if ((*jvmti)->AddCapabilities(jvmti, &caps) != JVMTI_ERROR_NONE) return JNI_ERR;
    jvmtiEventCallbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.SampledObjectAlloc = on_alloc;
    cb.ObjectFree = on_free;
    cb.GarbageCollectionStart = on_gc_start;
    cb.GarbageCollectionFinish = on_gc_finish;
    cb.VMInit = on_vm_init;
    cb.VMDeath = on_vm_death;
    (*jvmti)->SetEventCallbacks(jvmti, &cb, sizeof cb);
    (*jvmti)->CreateRawMonitor(jvmti, "lock", &lock);
    (*jvmti)->CreateRawMonitor(jvmti, "wake", &wake);
    (*jvmti)->SetHeapSamplingInterval(jvmti, interval);
    jvmtiEvent events[] = {JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, JVMTI_EVENT_GARBAGE_COLLECTION_START, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH, JVMTI_EVENT_VM_INIT, JVMTI_EVENT_VM_DEATH};
    for (unsigned i = 0; i < sizeof events / sizeof events[0]; i++) (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, events[i], NULL);
    if (mode_tag) (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_OBJECT_FREE, NULL);
    return JNI_OK;
}
