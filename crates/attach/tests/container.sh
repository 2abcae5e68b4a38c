# A container for tests, run by `unshare --mount --pid --fork sh -c` with
# the arguments ROOT pivot|chroot COMMAND...: ROOT becomes the root
# directory of COMMAND (by pivot_root, as a container runtime does, or by
# chroot), with /bin, /lib, /usr, /etc and /dev bound in and its own /proc
# and /tmp (sticky, world-writable). Used by crates/attach/tests/attach.rs
# and crates/cli/tests/hostile.rs (include_str!).
set -e
R=$1; PIVOT=$2; shift 2
mount --bind "$R" "$R"
for d in bin lib lib32 lib64 libx32 sbin; do
  if [ -L /$d ]; then ln -s "$(readlink /$d)" "$R/$d"; elif [ -d /$d ]; then mkdir -p "$R/$d"; mount --rbind /$d "$R/$d"; fi
done
for d in usr etc dev; do mkdir -p "$R/$d"; mount --rbind /$d "$R/$d"; done
mkdir -p "$R/proc" "$R/tmp"; chmod 1777 "$R/tmp"
mount -t proc proc "$R/proc"
if [ "$PIVOT" = pivot ]; then
  mkdir -p "$R/.old"; cd "$R"; pivot_root . .old; umount -l /.old; cd /; exec "$@"
else
  exec chroot "$R" "$@"
fi
