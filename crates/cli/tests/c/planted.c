/* Stands for an agent the JVM's user controls, for the tests of `oxprof
 * attach`: it answers each command by planting something at the reply path
 * the CLI named (option "reply=<path>"). What, says the first line of the
 * file $OXPROF_TEST_PLANT names:
 *   fifo       a FIFO nobody writes to
 *   symlink T  a symlink to T
 *   escape     a reply with terminal escape sequences
 *   huge       a reply line followed by a 256 MiB hole (a sparse file)
 * Built as liboxprof-planted.so, so `oxprof attach` takes it for its agent. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int Agent_OnLoad(void *vm, char *options, void *reserved) {
    (void)vm;
    (void)options;
    (void)reserved;
    return 0;
}

int Agent_OnAttach(void *vm, char *options, void *reserved) {
    (void)vm;
    (void)reserved;
    char reply[4096], mode[4096];
    const char *r = options != NULL ? strstr(options, "reply=") : NULL;
    const char *control = getenv("OXPROF_TEST_PLANT");
    if (r == NULL || control == NULL) return 0;
    r += strlen("reply=");
    size_t n = strcspn(r, ",");
    if (n >= sizeof reply) return 1;
    memcpy(reply, r, n);
    reply[n] = 0;
    FILE *f = fopen(control, "r");
    if (f == NULL) return 1;
    char *line = fgets(mode, sizeof mode, f);
    fclose(f);
    if (line == NULL) return 1;
    mode[strcspn(mode, "\n")] = 0;
    if (strcmp(mode, "fifo") == 0) return mkfifo(reply, 0644) == 0 ? 0 : 1;
    if (strncmp(mode, "symlink ", 8) == 0) return symlink(mode + 8, reply) == 0 ? 0 : 1;
    int fd = open(reply, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return 1;
    int ok = 0;
    if (strcmp(mode, "escape") == 0) {
        static const char text[] = "running: \033]0;owned\007\033[2J\033[31mcpu\033[0m\r\n\302\233line\177 two\n";
        ok = write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1);
    } else if (strcmp(mode, "huge") == 0) {
        static const char text[] = "running: cpu\n";
        ok = write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1) && ftruncate(fd, 256L << 20) == 0;
    }
    close(fd);
    return ok ? 0 : 1;
}
