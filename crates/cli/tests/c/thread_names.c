/* JNI side of tests/java/ThreadNames.java: native threads (plain pthreads,
 * never attached to the JVM) that name themselves, or rename themselves
 * after a while, and burn a known amount of their own CPU time (measured
 * with CLOCK_THREAD_CPUTIME_ID and returned: the truth the tests compare
 * the profile with). Each scenario burns in leaf functions of its own, so
 * the profile tells them apart whatever their threads are named. */
#define _GNU_SOURCE
#include <jni.h>
#include <pthread.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "cpu_leaf.h"

/* Scenario 0: named at once, burns, ends. */
LEAF(tn_own_leaf)
/* Scenario 1: burns under its inherited name, renames itself, burns, ends. */
LEAF(tn_renamed_before_leaf)
LEAF(tn_renamed_after_leaf)
/* Scenario 2: as 1, then stays alive (blocked) until the JVM exits. */
LEAF(tn_live_before_leaf)
LEAF(tn_live_after_leaf)

typedef long long (*leaf_fn)(long long);
static const leaf_fn BEFORE[3] = {tn_own_leaf, tn_renamed_before_leaf, tn_live_before_leaf};
static const leaf_fn AFTER[3] = {tn_own_leaf, tn_renamed_after_leaf, tn_live_after_leaf};

struct tn_job {
    int scenario;
    long long before_ns, after_ns, used_before, used_after;
    char name[16];
    char inherited[17];
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
};

static void *tn_thread(void *arg) {
    struct tn_job *j = arg;
    prctl(PR_GET_NAME, j->inherited);
    if (j->scenario == 0) {
        /* Its first action: the name it is known by from the start. */
        pthread_setname_np(pthread_self(), j->name);
        j->used_before = 0;
        j->used_after = tn_own_leaf(j->after_ns);
    } else {
        j->used_before = BEFORE[j->scenario](j->before_ns);
        pthread_setname_np(pthread_self(), j->name);
        j->used_after = AFTER[j->scenario](j->after_ns);
    }
    pthread_mutex_lock(&j->lock);
    j->done = 1;
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
    if (j->scenario == 2) {
        /* Alive until the process ends; blocked, no CPU. */
        for (;;) pause();
    }
    return NULL;
}

/* Runs one scenario on a new native thread named `name` (see above), burning
 * before_ns then after_ns of its CPU; waits until it has burnt both (and, but
 * for scenario 2, ended). out = {CPU used before, CPU used after}; returns the
 * name the thread inherited from this one. */
JNIEXPORT jstring JNICALL Java_ThreadNames_run(JNIEnv *env, jclass cls, jint scenario, jstring name, jlong before_ns, jlong after_ns, jlongArray out) {
    (void)cls;
    static struct tn_job jobs[8];
    static int next = 0;
    if (scenario < 0 || scenario > 2 || next >= 8) return NULL;
    struct tn_job *j = &jobs[next++];
    memset(j, 0, sizeof *j);
    j->scenario = scenario;
    j->before_ns = before_ns;
    j->after_ns = after_ns;
    const char *n = (*env)->GetStringUTFChars(env, name, NULL);
    strncpy(j->name, n, 15);
    (*env)->ReleaseStringUTFChars(env, name, n);
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, tn_thread, j) != 0) return NULL;
    pthread_mutex_lock(&j->lock);
    while (!j->done) pthread_cond_wait(&j->cond, &j->lock);
    pthread_mutex_unlock(&j->lock);
    if (scenario == 2) {
        pthread_detach(t);
    } else {
        pthread_join(t, NULL);
    }
    jlong res[2] = {j->used_before, j->used_after};
    (*env)->SetLongArrayRegion(env, out, 0, 2, res);
    return (*env)->NewStringUTF(env, j->inherited);
}
