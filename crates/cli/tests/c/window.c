/* A JNI library whose two native methods mark a window for oxprof's
 * begin=/end= triggers (tests/ttsp.rs). Each does a little distinct work so
 * the compiler keeps them apart. */
#include <jni.h>

static volatile long opened, closed;

JNIEXPORT void JNICALL Java_JniWindow_windowBegin(JNIEnv *env, jclass cls) {
    (void)env;
    (void)cls;
    opened++;
}

JNIEXPORT void JNICALL Java_JniWindow_windowEnd(JNIEnv *env, jclass cls) {
    (void)env;
    (void)cls;
    closed += 2;
}
