/*
 * The floor for any JEP 331 allocation profiler: a JVMTI agent that turns on
 * SampledObjectAlloc at the given mean interval (bytes; default 524288) with
 * a callback that does nothing. What the JVM spends sampling is all it
 * measures. bench/rotate.py builds it with the JDK's headers.
 *
 *   java -agentpath:empty_agent.so=524288 ...
 *   java -agentpath:empty_agent.so=524288,tag ...   # also can_tag_objects
 *
 * `tag` adds the can_tag_objects capability as well (oxprof's live engine
 * asks for it). The arm exists to measure that capability alone; in session 7
 * it made no measurable difference, because HotSpot derives its JVMTI export
 * flags from every capability an agent could still acquire, so any agent that
 * calls AddCapabilities already pays for it.
 */
#include <jvmti.h>
#include <stdlib.h>
#include <string.h>

static void JNICALL on_sample(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread, jobject object, jclass klass, jlong size) {
    (void)jvmti; (void)jni; (void)thread; (void)object; (void)klass; (void)size;
}

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved) {
    (void)reserved;
    jvmtiEnv *jvmti = NULL;
    if ((*vm)->GetEnv(vm, (void **)&jvmti, JVMTI_VERSION_11) != JNI_OK) return JNI_ERR;
    jvmtiCapabilities caps;
    memset(&caps, 0, sizeof caps);
    caps.can_generate_sampled_object_alloc_events = 1;
    if (options && strstr(options, "tag")) caps.can_tag_objects = 1;
    if ((*jvmti)->AddCapabilities(jvmti, &caps) != JVMTI_ERROR_NONE) return JNI_ERR;
    jvmtiEventCallbacks cbs;
    memset(&cbs, 0, sizeof cbs);
    cbs.SampledObjectAlloc = on_sample;
    (*jvmti)->SetEventCallbacks(jvmti, &cbs, sizeof cbs);
    jint interval = (options && *options >= '0' && *options <= '9') ? (jint)atol(options) : 524288;
    (*jvmti)->SetHeapSamplingInterval(jvmti, interval);
    (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
    return JNI_OK;
}
