/* Stub JVMTI agent for testing bench/run.py without the real oxprof agent.
 * Options (comma-separated): file=PATH  (writes a tiny collapsed-stacks file at VM death)
 *                            nosummary  (do not print the summary line)
 *                            fail       (refuse to load -> JVM exits non-zero)
 * At VM death prints "[oxprof] summary: samples=1000 failed=7 failed_pct=0.70 dropped=0
 * engine=stub extra_key=x" to stderr.
 * Build: gcc -shared -fPIC -O2 -I$JAVA_HOME/include -I$JAVA_HOME/include/linux -o stub.so stub_agent.c
 */
#include <jvmti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char out_file[4096];
static int no_summary;

static void JNICALL on_death(jvmtiEnv *jvmti, JNIEnv *jni) {
    if (out_file[0]) {
        FILE *f = fopen(out_file, "w");
        if (f) {
            fprintf(f, "java/lang/Thread.run;Main.work;Main.leafA 600\n");
            fprintf(f, "java/lang/Thread.run;Main.work;Main.leafB 300\n");
            fprintf(f, "java/lang/Thread.run;Main.other;Main.leafA 93\n");
            fclose(f);
        }
    }
    if (!no_summary)
        fprintf(stderr, "[oxprof] summary: samples=1000 failed=7 failed_pct=0.70 dropped=0 "
                        "engine=stub extra_key=x\n");
}

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved) {
    char buf[8192] = "";
    if (options) strncpy(buf, options, sizeof buf - 1);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (!strncmp(tok, "file=", 5)) strncpy(out_file, tok + 5, sizeof out_file - 1);
        else if (!strcmp(tok, "nosummary")) no_summary = 1;
        else if (!strcmp(tok, "fail")) { fprintf(stderr, "[stub] refusing to load\n"); return JNI_ERR; }
    }
    jvmtiEnv *jvmti;
    if ((*vm)->GetEnv(vm, (void **)&jvmti, JVMTI_VERSION_1_2) != JNI_OK) return JNI_ERR;
    jvmtiEventCallbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.VMDeath = on_death;
    (*jvmti)->SetEventCallbacks(jvmti, &cb, sizeof cb);
    (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_VM_DEATH, NULL);
    return JNI_OK;
}
