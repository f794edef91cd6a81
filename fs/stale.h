/* stale.h - a mount point left by a dlhfs that died, cleared at the next mount */
#ifndef DLH_FS_STALE_H
#define DLH_FS_STALE_H

#include <stddef.h>

/* The mount point among dlhfs's arguments (the last one that is not an
 * option or an option's value), or NULL. */
const char *dlh_mountpoint_arg(int argc, char *const argv[]);

/* When mp is a FUSE mount whose daemon is gone (stat fails with ENOTCONN)
 * and the mount table says dlhfs made it, unmounts it (lazily: as root by
 * umount2, else by fusermount3 -u -z) so that it can be mounted again.
 * Returns 1 (cleared, msg says so), 0 (nothing stale there), or -errno with
 * msg. */
int dlh_clear_stale_mount(const char *mp, char *msg, size_t len);

#endif
