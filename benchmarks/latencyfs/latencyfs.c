/*
 * latencyfs: a FUSE passthrough sleeping before every operation, a stand-in for
 * NFS/Lustre in benchmarks (see benchmarks/latencyfs.py for the Python side).
 *
 *     latencyfs BACKING MOUNTPOINT [-f] [-o delay_ms=0.5,cache_s=0,max_threads=256]
 *
 * Invariants:
 * - Every callback sleeps `delay_ms` (nanosleep, timer slack 1 ns) before acting, so
 *   one kernel request costs one delay; a setattr that changes several things is
 *   several callbacks and so several delays, as with the Python daemon it replaces.
 * - Waits overlap: requests are served by up to `max_threads` threads (default 256;
 *   libfuse's own default is 10) and the kernel may keep as many background
 *   requests (reads ahead, releases) in flight (max_background; the kernel's default
 *   is 12). Lookups and readdirs within one directory overlap too (see dev_writev).
 * - No kernel caching by default: entry, attribute and negative timeouts are
 *   `cache_s` (default 0, as NFS actimeo=0). Page cache dropped at each open.
 * - Paths are resolved relative to the working directory, which is the backing
 *   directory, opened before mounting (so BACKING may even be MOUNTPOINT itself).
 * - st_ino and d_ino are the backing's (use_ino): hard links show one inode.
 * - New entries belong to the caller (the parent's group under a set-gid
 *   directory): created as the daemon, then chowned. The kernel has applied the
 *   caller's umask (the daemon's is 0) and checks permissions
 *   (default_permissions); the kernel, not the daemon, drops set-id bits on write
 *   and chown (HANDLE_KILLPRIV off).
 * Not done: ioctls, locks (kept by the kernel), reflinks (FUSE has no
 * remap_file_range), ACL enforcement. Files unlinked while open live on as
 * .fuse_hiddenNNNN in the backing until closed (no hard_remove).
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312 /* fuse_loop_cfg_*: libfuse >= 3.12 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h> /* fuse_parse_cmdline, fuse_session_custom_io */
#include <limits.h>
#include <linux/fuse.h> /* the kernel protocol: the INIT reply */
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "faults.h"

#define DEFAULT_DELAY_MS "0.5"
#define DEFAULT_MAX_THREADS 256
#define MAX_DELAY_MS 86400000.0 /* a day: keeps the nanoseconds in range */

struct options {
	char *delay_ms;
	char *cache_s;
	char *faults;
	char *fault_log;
	char *backing;
	int help;
};

static struct {
	struct timespec delay;
	double cache_s;
	unsigned max_background;
	uid_t uid; /* the daemon's: entries it creates already belong to it */
	gid_t gid;
	int parallel_dirops; /* the kernel offers it and libfuse wants it */
} lfs;

/* Sleep the delay; a signal does not shorten it. */
static void wait_round_trip(void)
{
	struct timespec left = lfs.delay;

	if (left.tv_sec == 0 && left.tv_nsec == 0)
		return;
	while (nanosleep(&left, &left) == -1 && errno == EINTR)
		;
}

/* "/a/b" as a path relative to the working directory (the backing). */
/* Before serving a request: an injected fault (faults.c) answers it, after the
   delay as a failing server's answer would come; else it is served. */
#define ENTER(op, path)                                  \
	do {                                             \
		int fault_;                              \
		wait_round_trip();                       \
		fault_ = faults_enter((op), (path));     \
		if (fault_)                              \
			return fault_;                   \
	} while (0)

static const char *rel(const char *path)
{
	return path[1] ? path + 1 : ".";
}

static int result(int rc)
{
	return rc == -1 ? -errno : 0;
}

/*
 * Give a new entry to the caller, as a kernel would (the daemon created it).
 * fd >= 0: the entry is open as fd (create), else it is named by `path`.
 */
static int claim(const char *path, int fd)
{
	const struct fuse_context *ctx = fuse_get_context();
	uid_t uid = ctx->uid;
	gid_t gid = ctx->gid;
	struct stat st, parent;
	char *dir;
	char *slash;
	int rc;

	if (uid == lfs.uid && gid == lfs.gid)
		return 0; /* created with the caller's ids (set-gid parents included) */
	if (fd >= 0 ? fstat(fd, &st) : fstatat(AT_FDCWD, rel(path), &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	dir = strdup(path);
	if (dir == NULL)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	slash[slash == dir] = '\0'; /* "/a/b" -> "/a", "/b" -> "/" */
	rc = stat(rel(dir), &parent);
	free(dir);
	if (rc == -1)
		return -errno;
	if (parent.st_mode & S_ISGID)
		gid = st.st_gid; /* inherited from the parent, which the backing did */
	if (st.st_uid == uid && st.st_gid == gid)
		return 0;
	if (fd >= 0 ? fchown(fd, uid, gid)
		    : fchownat(AT_FDCWD, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW))
		return -errno;
	/* chown clears set-id bits of non-directories; the creator asked for them. */
	if (S_ISREG(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID)))
		return result(fd >= 0 ? fchmod(fd, st.st_mode & 07777)
				      : fchmodat(AT_FDCWD, rel(path), st.st_mode & 07777, 0));
	return 0;
}

/* -- metadata ------------------------------------------------------------------ */

static int lfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	ENTER("getattr", path);
	/* The kernel sends a handle only for regular files: fh is then a descriptor. */
	if (fi != NULL)
		return result(fstat((int)fi->fh, st));
	return result(fstatat(AT_FDCWD, rel(path), st, AT_SYMLINK_NOFOLLOW));
}

static int lfs_readlink(const char *path, char *buf, size_t size)
{
	ssize_t n;

	ENTER("readlink", path);
	n = readlink(rel(path), buf, size - 1);
	if (n == -1)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int lfs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	(void)fi;
	ENTER("chmod", path);
	return result(chmod(rel(path), mode & 07777));
}

static int lfs_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	(void)fi;
	ENTER("chown", path);
	return result(fchownat(AT_FDCWD, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW));
}

/* tv carries UTIME_NOW and UTIME_OMIT through as utimensat(2) takes them. */
static int lfs_utimens(const char *path, const struct timespec tv[2],
		       struct fuse_file_info *fi)
{
	(void)fi;
	ENTER("utimens", path);
	return result(utimensat(AT_FDCWD, rel(path), tv, AT_SYMLINK_NOFOLLOW));
}

static int lfs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	ENTER("truncate", path);
	if (fi != NULL)
		return result(ftruncate((int)fi->fh, size));
	return result(truncate(rel(path), size));
}

static int lfs_statfs(const char *path, struct statvfs *sv)
{
	ENTER("statfs", path);
	return result(statvfs(rel(path), sv));
}

static int lfs_setxattr(const char *path, const char *name, const char *value,
			size_t size, int flags)
{
	ENTER("setxattr", path);
	return result(lsetxattr(rel(path), name, value, size, flags));
}

static int lfs_getxattr(const char *path, const char *name, char *value, size_t size)
{
	ssize_t n;

	ENTER("getxattr", path);
	n = lgetxattr(rel(path), name, value, size);
	return n == -1 ? -errno : (int)n;
}

static int lfs_listxattr(const char *path, char *list, size_t size)
{
	ssize_t n;

	ENTER("listxattr", path);
	n = llistxattr(rel(path), list, size);
	return n == -1 ? -errno : (int)n;
}

static int lfs_removexattr(const char *path, const char *name)
{
	ENTER("removexattr", path);
	return result(lremovexattr(rel(path), name));
}

/* -- namespace ----------------------------------------------------------------- */

static int lfs_mknod(const char *path, mode_t mode, dev_t rdev)
{
	ENTER("mknod", path);
	if (mknod(rel(path), mode, rdev) == -1)
		return -errno;
	return claim(path, -1);
}

static int lfs_mkdir(const char *path, mode_t mode)
{
	ENTER("mkdir", path);
	if (mkdir(rel(path), mode) == -1)
		return -errno;
	return claim(path, -1);
}

/* Create `path` as a symbolic link whose text is `target`. */
static int lfs_symlink(const char *target, const char *path)
{
	ENTER("symlink", path);
	if (symlink(target, rel(path)) == -1)
		return -errno;
	return claim(path, -1);
}

/* Create `path` as another name of the existing `existing` (never followed). */
static int lfs_link(const char *existing, const char *path)
{
	ENTER("link", path);
	return result(linkat(AT_FDCWD, rel(existing), AT_FDCWD, rel(path), 0));
}

static int lfs_unlink(const char *path)
{
	ENTER("unlink", path);
	return result(unlink(rel(path)));
}

static int lfs_rmdir(const char *path)
{
	ENTER("rmdir", path);
	return result(rmdir(rel(path)));
}

/* RENAME_NOREPLACE and RENAME_EXCHANGE reach the backing. */
static int lfs_rename(const char *from, const char *to, unsigned int flags)
{
	ENTER("rename", from);
	return result(renameat2(AT_FDCWD, rel(from), AT_FDCWD, rel(to), flags));
}

static int lfs_opendir(const char *path, struct fuse_file_info *fi)
{
	int fd;
	DIR *dp;

	ENTER("opendir", path);
	fd = open(rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1)
		return -errno;
	dp = fdopendir(fd);
	if (dp == NULL) {
		int err = errno;

		close(fd);
		return -err;
	}
	fi->fh = (uintptr_t)dp;
	return 0;
}

/*
 * All entries at once (libfuse buffers them and asks again only after a rewind);
 * types from d_type, inode numbers from d_ino, no stat unless d_type is unknown.
 */
static int lfs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t offset,
		       struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	DIR *dp = (DIR *)(uintptr_t)fi->fh;
	struct dirent *de;

	(void)offset;
	(void)flags;
	ENTER("readdir", path);
	rewinddir(dp);
	for (;;) {
		struct stat st;

		errno = 0;
		de = readdir(dp);
		if (de == NULL)
			return -errno;
		memset(&st, 0, sizeof(st));
		st.st_ino = de->d_ino;
		st.st_mode = DTTOIF(de->d_type);
		if (de->d_type == DT_UNKNOWN &&
		    fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
			st.st_mode = 0; /* gone meanwhile: the caller's stat will tell */
		if (fill(buf, de->d_name, &st, 0, 0))
			return 0; /* out of memory: libfuse reports it */
	}
}

static int lfs_releasedir(const char *path, struct fuse_file_info *fi)
{
	ENTER("releasedir", path);
	return result(closedir((DIR *)(uintptr_t)fi->fh));
}

static int lfs_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	int fd = dirfd((DIR *)(uintptr_t)fi->fh);

	ENTER("fsyncdir", path);
	return result(datasync ? fdatasync(fd) : fsync(fd));
}

/* -- data: fi->fh is a descriptor of the backing file ----------------------------- */

static int lfs_open(const char *path, struct fuse_file_info *fi)
{
	int fd;

	ENTER("open", path);
	fd = open(rel(path), fi->flags | O_CLOEXEC);
	if (fd == -1)
		return -errno;
	fi->fh = (uint64_t)fd;
	fi->direct_io = faults_direct(path);
	return 0;
}

static int lfs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int fd, err;

	ENTER("create", path);
	fd = open(rel(path), fi->flags | O_CREAT | O_CLOEXEC, mode);
	if (fd == -1)
		return -errno;
	err = claim(path, fd);
	if (err) {
		close(fd);
		return err;
	}
	fi->fh = (uint64_t)fd;
	fi->direct_io = faults_direct(path);
	return 0;
}

static int lfs_read(const char *path, char *buf, size_t size, off_t offset,
		    struct fuse_file_info *fi)
{
	size_t done = 0;

	ENTER("read", path);
	size = faults_limit("read", path, size);
	while (done < size) { /* a short read would look like the end of the file */
		ssize_t n = pread((int)fi->fh, buf + done, size - done, offset + (off_t)done);

		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return done ? (int)done : -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (int)done;
}

static int lfs_write(const char *path, const char *buf, size_t size, off_t offset,
		     struct fuse_file_info *fi)
{
	size_t done = 0;

	ENTER("write", path);
	while (done < size) {
		ssize_t n = pwrite((int)fi->fh, buf + done, size - done, offset + (off_t)done);

		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return done ? (int)done : -errno;
		done += (size_t)n;
	}
	return (int)done;
}

/* close(2) of one descriptor of the file: close a duplicate, keep ours open. */
static int lfs_flush(const char *path, struct fuse_file_info *fi)
{
	int dup_fd;

	ENTER("flush", path);
	dup_fd = dup((int)fi->fh);
	if (dup_fd == -1)
		return -errno;
	return result(close(dup_fd));
}

static int lfs_release(const char *path, struct fuse_file_info *fi)
{
	ENTER("release", path);
	return result(close((int)fi->fh));
}

static int lfs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	ENTER("fsync", path);
	return result(datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh));
}

static int lfs_fallocate(const char *path, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi)
{
	ENTER("fallocate", path);
	return result(fallocate((int)fi->fh, mode, offset, length));
}

/* SEEK_DATA and SEEK_HOLE answered by the backing: sparse files stay sparse. */
static off_t lfs_lseek(const char *path, off_t offset, int whence, struct fuse_file_info *fi)
{
	off_t pos;

	ENTER("lseek", path);
	pos = lseek((int)fi->fh, offset, whence);
	return pos == -1 ? -errno : pos;
}

/* Done by the backing, as an NFS 4.2 server-side copy. */
static ssize_t lfs_copy_file_range(const char *path_in, struct fuse_file_info *fi_in,
				   off_t off_in, const char *path_out,
				   struct fuse_file_info *fi_out, off_t off_out,
				   size_t size, int flags)
{
	ssize_t n;

	(void)path_out;
	ENTER("copy_file_range", path_in);
	size = faults_limit("copy_file_range", path_in, size);
	n = copy_file_range((int)fi_in->fh, &off_in, (int)fi_out->fh, &off_out, size,
			    (unsigned int)flags);
	return n == -1 ? -errno : n;
}

static void *lfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	lfs.parallel_dirops = !!(conn->want & FUSE_CAP_PARALLEL_DIROPS);
	/* Set-id bits must drop when another user writes; the kernel does it (as a
	   setattr) unless told the daemon will, and our root writes would keep them. */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	conn->max_background = lfs.max_background;
	cfg->use_ino = 1;
	cfg->entry_timeout = lfs.cache_s;
	cfg->attr_timeout = lfs.cache_s;
	cfg->negative_timeout = lfs.cache_s;
	return NULL;
}

static const struct fuse_operations lfs_ops = {
	.init = lfs_init,
	.getattr = lfs_getattr,
	.readlink = lfs_readlink,
	.mknod = lfs_mknod,
	.mkdir = lfs_mkdir,
	.unlink = lfs_unlink,
	.rmdir = lfs_rmdir,
	.symlink = lfs_symlink,
	.rename = lfs_rename,
	.link = lfs_link,
	.chmod = lfs_chmod,
	.chown = lfs_chown,
	.truncate = lfs_truncate,
	.open = lfs_open,
	.read = lfs_read,
	.write = lfs_write,
	.statfs = lfs_statfs,
	.flush = lfs_flush,
	.release = lfs_release,
	.fsync = lfs_fsync,
	.setxattr = lfs_setxattr,
	.getxattr = lfs_getxattr,
	.listxattr = lfs_listxattr,
	.removexattr = lfs_removexattr,
	.opendir = lfs_opendir,
	.readdir = lfs_readdir,
	.releasedir = lfs_releasedir,
	.fsyncdir = lfs_fsyncdir,
	.create = lfs_create,
	.utimens = lfs_utimens,
	.fallocate = lfs_fallocate,
	.copy_file_range = lfs_copy_file_range,
	.lseek = lfs_lseek,
};

/* -- /dev/fuse ------------------------------------------------------------------ */

/*
 * libfuse before 3.17.1 wants FUSE_CAP_PARALLEL_DIROPS (its default) but never sets
 * FUSE_PARALLEL_DIROPS in its INIT reply, so the kernel serializes lookups and
 * readdirs within each directory (an NFS client does not): 64 first stats of names
 * in one directory took 64 delays. The device reads and writes pass through here to
 * set the flag in that reply. INIT is the first request, answered before any other
 * is sent; `init_unique` is its id until the reply is patched, then 0.
 */
static _Atomic uint64_t init_unique;

static ssize_t dev_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	(void)userdata;
	if (n >= (ssize_t)sizeof(*in) && in->opcode == FUSE_INIT)
		atomic_store(&init_unique, in->unique);
	return n;
}

static ssize_t dev_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	uint64_t init = atomic_load(&init_unique);

	(void)userdata;
	if (init != 0 && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header) &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
		const struct fuse_out_header *out = iov[0].iov_base;
		struct fuse_init_out *arg = iov[1].iov_base;

		if (out->unique == init && out->error == 0) {
			if (lfs.parallel_dirops)
				arg->flags |= FUSE_PARALLEL_DIROPS;
			atomic_store(&init_unique, 0);
		}
	}
	return writev(fd, iov, count);
}

static const struct fuse_custom_io dev_io = {.read = dev_read, .writev = dev_writev};

/* -- command line -------------------------------------------------------------- */

#define OPT(t, field) {t, offsetof(struct options, field), 1}

static const struct fuse_opt option_spec[] = {
	OPT("delay_ms=%s", delay_ms),
	OPT("cache_s=%s", cache_s),
	OPT("faults=%s", faults),
	OPT("fault_log=%s", fault_log),
	OPT("-h", help),
	OPT("--help", help),
	FUSE_OPT_END,
};

/* The first non-option argument is BACKING; the second (MOUNTPOINT) is libfuse's. */
static int take_backing(void *data, const char *arg, int key, struct fuse_args *args)
{
	struct options *o = data;

	(void)args;
	if (key == FUSE_OPT_KEY_NONOPT && o->backing == NULL) {
		o->backing = strdup(arg);
		return o->backing == NULL ? -1 : 0;
	}
	return 1;
}

static int parse_seconds(const char *text, const char *name, double scale, double *out)
{
	char *end;
	double value = strtod(text, &end);

	if (end == text || *end != '\0' || !isfinite(value) || value < 0 ||
	    value * scale > MAX_DELAY_MS / 1000.0) {
		fprintf(stderr, "latencyfs: %s must be a number >= 0, got '%s'\n", name, text);
		return -1;
	}
	*out = value * scale;
	return 0;
}

static void usage(const char *prog)
{
	printf("usage: %s BACKING MOUNTPOINT [options]\n\n"
	       "Mount BACKING at MOUNTPOINT, sleeping before every operation.\n\n"
	       "    -o delay_ms=MS         sleep per operation (default " DEFAULT_DELAY_MS ")\n"
	       "    -o cache_s=S           kernel entry/attribute/negative cache timeout\n"
	       "                           (default 0: every call reaches the daemon)\n"
	       "    -o max_threads=N       threads serving requests (default %d)\n"
	       "    -o faults=RULES        inject the failures RULES lists (faults.c)\n"
	       "    -o fault_log=LOG       append each injected failure to LOG\n\n",
	       prog, DEFAULT_MAX_THREADS);
	fuse_cmdline_help();
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct options o = {0};
	struct fuse_cmdline_opts cl;
	struct fuse_loop_config *loop;
	struct fuse *fuse;
	struct fuse_session *se;
	double delay_s;
	long long delay_ns;
	int backing_fd, res = 1;
	char defaults[64];

	/* Defaults go before the caller's options, which may override max_threads. */
	snprintf(defaults, sizeof(defaults), "-omax_threads=%d", DEFAULT_MAX_THREADS);
	if (fuse_opt_parse(&args, &o, option_spec, take_backing) == -1 ||
	    fuse_opt_insert_arg(&args, 1, defaults) == -1 ||
	    fuse_opt_insert_arg(&args, 2, "-oallow_other,default_permissions,"
					  "fsname=latencyfs,subtype=latencyfs") == -1 ||
	    fuse_parse_cmdline(&args, &cl) == -1)
		return 1;
	if (o.help) {
		usage(argv[0]);
		return 0;
	}
	if (cl.show_version) {
		printf("latencyfs, FUSE library %s\n", fuse_pkgversion());
		return 0;
	}
	if (o.backing == NULL || cl.mountpoint == NULL) {
		fprintf(stderr, "usage: %s BACKING MOUNTPOINT [options] (--help for more)\n",
			argv[0]);
		return 1;
	}
	if (parse_seconds(o.delay_ms ? o.delay_ms : DEFAULT_DELAY_MS, "delay_ms", 0.001,
			  &delay_s) == -1 ||
	    parse_seconds(o.cache_s ? o.cache_s : "0", "cache_s", 1, &lfs.cache_s) == -1)
		return 1;
	if (o.faults != NULL && faults_load(o.faults, o.fault_log) == -1)
		return 1;
	if (cl.max_threads < 1) {
		fprintf(stderr, "latencyfs: max_threads must be >= 1\n");
		return 1;
	}
	delay_ns = llround(delay_s * 1e9);
	lfs.delay.tv_sec = (time_t)(delay_ns / 1000000000);
	lfs.delay.tv_nsec = (long)(delay_ns % 1000000000);
	lfs.max_background = cl.max_threads;
	lfs.uid = geteuid();
	lfs.gid = getegid();

	/* Opened before mounting, so a mount over BACKING itself still reaches it. */
	backing_fd = open(o.backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (backing_fd == -1) {
		fprintf(stderr, "latencyfs: %s: %s\n", o.backing, strerror(errno));
		return 1;
	}
	umask(0); /* the kernel has applied the caller's umask already */
	/* Sleeps end on time, not up to 50 us late (the default slack). */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);

	fuse = fuse_new(&args, &lfs_ops, sizeof(lfs_ops), NULL);
	if (fuse == NULL)
		goto out_args;
	if (fuse_mount(fuse, cl.mountpoint) != 0)
		goto out_fuse;
	se = fuse_get_session(fuse);
	if (fuse_session_custom_io(se, &dev_io, fuse_session_fd(se)) != 0)
		goto out_mount;
	/* fuse_daemonize moves to "/" when it forks: move to the backing after it. */
	if (fuse_daemonize(cl.foreground) != 0 || fchdir(backing_fd) == -1 ||
	    fuse_set_signal_handlers(se) != 0)
		goto out_mount;

	if (cl.singlethread) {
		res = fuse_loop(fuse);
	} else {
		loop = fuse_loop_cfg_create();
		if (loop == NULL)
			goto out_signals;
		fuse_loop_cfg_set_clone_fd(loop, (unsigned int)cl.clone_fd);
		fuse_loop_cfg_set_max_threads(loop, cl.max_threads);
		if (cl.max_idle_threads != UINT_MAX) /* default: idle threads stay */
			fuse_loop_cfg_set_idle_threads(loop, cl.max_idle_threads);
		res = fuse_loop_mt(fuse, loop);
		fuse_loop_cfg_destroy(loop);
	}
	/* Ended by unmounting (0) or by a signal (its number): both a clean stop. */
	res = res < 0 ? 1 : 0;
out_signals:
	fuse_remove_signal_handlers(se);
out_mount:
	fuse_unmount(fuse);
out_fuse:
	fuse_destroy(fuse);
out_args:
	fuse_opt_free_args(&args);
	free(cl.mountpoint);
	free(o.backing);
	free(o.delay_ms);
	free(o.cache_s);
	free(o.faults);
	free(o.fault_log);
	close(backing_fd);
	return res;
}
