/* A minimal JVMTI agent for the attach tests. Options "<code>[,<file>]":
 * appends the options to <file> (a path in the JVM's mount namespace) and
 * returns <code> from Agent_OnAttach. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int Agent_OnAttach(void *vm, char *options, void *reserved) {
    (void)vm;
    (void)reserved;
    if (options == NULL) return 0;
    const char *comma = strchr(options, ',');
    if (comma != NULL) {
        FILE *f = fopen(comma + 1, "a");
        if (f != NULL) {
            fprintf(f, "%s\n", options);
            fclose(f);
        }
    }
    return atoi(options);
}
