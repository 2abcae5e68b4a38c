/* JNI side of tests/java/NativeSweep.java: native functions that burn a
 * known amount of this thread's CPU time (measured with
 * CLOCK_THREAD_CPUTIME_ID and returned, the truth the tests compare the
 * profile with), deep native recursion, native code that calls back into
 * Java, libraries opened (and closed) with dlopen, threads attached to the
 * JVM, and time in system calls. Each phase burns in a leaf function of its
 * own, so the profile tells them apart. Built with frame pointers. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <jni.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cpu_leaf.h"

static long long mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

LEAF(ns_burn_leaf)
LEAF(ns_deep_leaf)
LEAF(ns_cb_outer_leaf)
LEAF(ns_cb_inner_leaf)
LEAF(ns_attached_leaf)
LEAF(ns_raw_leaf)

JNIEXPORT jlong JNICALL Java_NativeSweep_burn(JNIEnv *env, jclass cls, jlong ns) {
    (void)env;
    (void)cls;
    return ns_burn_leaf(ns);
}

/* Recursion `depth` frames deep, then a burn. */
__attribute__((noinline)) long long ns_rec(int depth, long long ns) {
    if (depth <= 1) return ns_deep_leaf(ns);
    long long r = ns_rec(depth - 1, ns);
    leaf_sink += 1; /* not a tail call */
    return r;
}

JNIEXPORT jlong JNICALL Java_NativeSweep_recurse(JNIEnv *env, jclass cls, jint depth, jlong ns) {
    (void)env;
    (void)cls;
    return ns_rec(depth, ns);
}

/* native -> Java -> native: burns ns/2 here, then calls NativeSweep.javaMiddle(ns/2),
 * which calls the native `inner`. */
__attribute__((noinline)) long long ns_cb_outer(JNIEnv *env, jclass cls, long long ns) {
    long long used = ns_cb_outer_leaf(ns / 2);
    jmethodID m = (*env)->GetStaticMethodID(env, cls, "javaMiddle", "(J)J");
    if (m == NULL) return -1;
    long long r = (*env)->CallStaticLongMethod(env, cls, m, (jlong)(ns / 2));
    leaf_sink += 1;
    return used + r;
}

JNIEXPORT jlong JNICALL Java_NativeSweep_callback(JNIEnv *env, jclass cls, jlong ns) {
    return ns_cb_outer(env, cls, ns);
}

JNIEXPORT jlong JNICALL Java_NativeSweep_inner(JNIEnv *env, jclass cls, jlong ns) {
    (void)env;
    (void)cls;
    return ns_cb_inner_leaf(ns);
}

/* dlopen(path), call `sym(ns)`, dlclose when asked. Returns the CPU used, or -1. */
JNIEXPORT jlong JNICALL Java_NativeSweep_dl(JNIEnv *env, jclass cls, jstring jpath, jstring jsym, jlong ns, jboolean close) {
    (void)cls;
    const char *path = (*env)->GetStringUTFChars(env, jpath, NULL);
    const char *sym = (*env)->GetStringUTFChars(env, jsym, NULL);
    long long r = -1;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) {
        long long (*f)(long long) = (long long (*)(long long))dlsym(h, sym);
        if (f != NULL) r = f(ns);
        if (close) dlclose(h);
    }
    (*env)->ReleaseStringUTFChars(env, jsym, sym);
    (*env)->ReleaseStringUTFChars(env, jpath, path);
    return r;
}

/* Threads attached to the JVM (and one that is not) burning in native code. */
static JavaVM *ns_vm;
struct ns_job {
    long long ns, used;
    int attach;
    char name[16];
};

static void *ns_thread(void *arg) {
    struct ns_job *j = arg;
    pthread_setname_np(pthread_self(), j->name);
    JNIEnv *env = NULL;
    if (j->attach) {
        JavaVMAttachArgs a = {JNI_VERSION_1_6, j->name, NULL};
        if ((*ns_vm)->AttachCurrentThread(ns_vm, (void **)&env, &a) != JNI_OK) return NULL;
        j->used = ns_attached_leaf(j->ns);
        (*ns_vm)->DetachCurrentThread(ns_vm);
    } else {
        j->used = ns_raw_leaf(j->ns);
    }
    return NULL;
}

/* Runs `attached` attached threads and one unattached thread, each burning ns;
 * out[0] = CPU of the attached ones, out[1] = the unattached one's. */
JNIEXPORT void JNICALL Java_NativeSweep_threads(JNIEnv *env, jclass cls, jint attached, jlong ns, jlongArray out) {
    (void)cls;
    (*env)->GetJavaVM(env, &ns_vm);
    struct ns_job jobs[16];
    pthread_t t[16];
    int n = attached + 1 > 16 ? 16 : attached + 1;
    for (int i = 0; i < n; i++) {
        jobs[i].ns = ns;
        jobs[i].used = 0;
        jobs[i].attach = i < n - 1;
        strcpy(jobs[i].name, jobs[i].attach ? "ns-attached" : "ns-raw");
        pthread_create(&t[i], NULL, ns_thread, &jobs[i]);
    }
    jlong res[2] = {0, 0};
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        res[jobs[i].attach ? 0 : 1] += jobs[i].used;
    }
    (*env)->SetLongArrayRegion(env, out, 0, 2, res);
}

/* System time: reads of /dev/zero (the kernel clears the buffer) until ns of CPU. */
__attribute__((noinline)) long long ns_sys_leaf(long long ns) {
    static char buf[1 << 16];
    int fd = open("/dev/zero", O_RDONLY);
    long long start = thread_cpu(), used = 0;
    while (used < ns) {
        for (int i = 0; i < 16; i++)
            if (read(fd, buf, sizeof buf) < 0) break;
        used = thread_cpu() - start;
    }
    close(fd);
    return used;
}

JNIEXPORT jlong JNICALL Java_NativeSweep_sys(JNIEnv *env, jclass cls, jlong ns) {
    (void)env;
    (void)cls;
    return ns_sys_leaf(ns);
}

/* Blocking: a read on a pipe its writer fills after ms, a nanosleep of ms, a
 * futex wait that times out after ms. Returns wall ns spent; no CPU to speak of. */
static int ns_pipe[2];
static void *ns_writer(void *arg) {
    long ms = (long)(intptr_t)arg;
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
    char c = 'x';
    if (write(ns_pipe[1], &c, 1) != 1) return NULL;
    return NULL;
}

__attribute__((noinline)) void ns_block_pipe(int ms) {
    pthread_t w;
    if (pipe(ns_pipe) != 0) return;
    pthread_create(&w, NULL, ns_writer, (void *)(intptr_t)ms);
    char c;
    if (read(ns_pipe[0], &c, 1) != 1) c = 0;
    pthread_join(w, NULL);
    close(ns_pipe[0]);
    close(ns_pipe[1]);
}

__attribute__((noinline)) void ns_block_sleep(int ms) {
    struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
}

__attribute__((noinline)) void ns_block_futex(int ms) {
    static int word = 0;
    struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &d, NULL, 0);
}

/* One of them (0 pipe, 1 sleep, 2 futex); returns the wall ns it took. */
JNIEXPORT jlong JNICALL Java_NativeSweep_blockOne(JNIEnv *env, jclass cls, jint which, jint ms) {
    (void)env;
    (void)cls;
    long long t0 = mono();
    if (which == 0) ns_block_pipe(ms);
    if (which == 1) ns_block_sleep(ms);
    if (which == 2) ns_block_futex(ms);
    return mono() - t0;
}

JNIEXPORT jlong JNICALL Java_NativeSweep_block(JNIEnv *env, jclass cls, jint ms) {
    (void)env;
    (void)cls;
    long long t0 = mono();
    ns_block_pipe(ms);
    ns_block_sleep(ms);
    ns_block_futex(ms);
    return mono() - t0;
}
