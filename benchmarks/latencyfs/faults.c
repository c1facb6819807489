/*
 * faults: a table of failures latencyfs injects, read once at mount (-o faults=RULES).
 *
 * One rule per line (blank lines and `#` comments ignored); a request meets the
 * first rule that matches it and fires (see times, after and p below):
 *
 *     OP GLOB ACTION [times=N] [after=K] [p=P] [ms=M]
 *     seed S
 *
 * - OP is a request (getattr, readlink, mknod, mkdir, unlink, rmdir, symlink,
 *   rename, link, chmod, chown, truncate, open, create, read, write, statfs, flush,
 *   release, fsync, setxattr, getxattr, listxattr, removexattr, opendir, readdir,
 *   releasedir, fsyncdir, utimens, fallocate, lseek, copy_file_range) or `*`.
 * - GLOB is an fnmatch(3) pattern for the path inside the mount (`/dir/file`); `*`
 *   matches across slashes.
 * - ACTION is an errno name (answered instead of serving the request), `short`
 *   (a read or copy_file_range moves half the bytes asked, at least one), `eof` (it
 *   moves nothing, as at the end of the file, whatever the file's size says) -- a
 *   file either may meet is opened with direct_io, so the count reaches the caller
 *   -- or `slow` (the request waits `ms` more, then is served).
 * - times=N injects at most N times (default: always); after=K lets the first K
 *   matching requests through; p=P injects each matching request with probability
 *   P (a xorshift generator seeded by `seed S`, default 1, so a table replays).
 *
 * Invariants: the table never changes after loading; counters are atomic, so with
 * many threads a rule still fires exactly `times` times; a request matching no rule
 * costs one fnmatch per rule. Each injection appends "OP ACTION PATH" to the log
 * (-o fault_log=LOG) in one write(2) to an O_APPEND descriptor, so lines never mix.
 */
#define _GNU_SOURCE

#include "faults.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_RULES 64
#define SHORT (-1)
#define SLOW (-2)
#define END (-3)
#define LIMITS(action) ((action) == SHORT || (action) == END)

struct rule {
	char op[24];
	char glob[256];
	int action; /* an errno > 0, SHORT, END or SLOW */
	long times; /* -1: no limit */
	long after;
	double p;
	struct timespec delay;
	_Atomic long seen;
	_Atomic long injected;
};

static struct rule rules[MAX_RULES];
static int nrules;
static int log_fd = -1;
static _Atomic uint64_t rng_state = 1;

static const struct {
	const char *name;
	int value;
} errnos[] = {
	{"EIO", EIO},		{"ENOSPC", ENOSPC},	  {"EDQUOT", EDQUOT},
	{"EACCES", EACCES},	{"EPERM", EPERM},	  {"ESTALE", ESTALE},
	{"EINTR", EINTR},	{"EAGAIN", EAGAIN},	  {"EROFS", EROFS},
	{"ENOENT", ENOENT},	{"ETIMEDOUT", ETIMEDOUT}, {"EBUSY", EBUSY},
	{"EOPNOTSUPP", EOPNOTSUPP}, {"EXDEV", EXDEV},	  {"EFBIG", EFBIG},
	{"EMFILE", EMFILE},	{"ENAMETOOLONG", ENAMETOOLONG},
};

static const char *action_name(int action)
{
	size_t i;

	if (action == SHORT)
		return "short";
	if (action == SLOW)
		return "slow";
	if (action == END)
		return "eof";
	for (i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (errnos[i].value == action)
			return errnos[i].name;
	return "?";
}

/* A uniform draw in [0, 1) from the shared xorshift64 state. */
static double draw(void)
{
	uint64_t old = atomic_load(&rng_state), next;

	do {
		next = old;
		next ^= next << 13;
		next ^= next >> 7;
		next ^= next << 17;
	} while (!atomic_compare_exchange_weak(&rng_state, &old, next));
	return (double)(next >> 11) / (double)(1ULL << 53);
}

static int parse_action(const char *text, int *action)
{
	size_t i;

	if (strcmp(text, "short") == 0 || strcmp(text, "slow") == 0 ||
	    strcmp(text, "eof") == 0) {
		*action = text[0] == 'e' ? END : text[1] == 'h' ? SHORT : SLOW;
		return 0;
	}
	for (i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++) {
		if (strcmp(errnos[i].name, text) == 0) {
			*action = errnos[i].value;
			return 0;
		}
	}
	return -1;
}

/* One `key=value` of a rule; -1 when it is not one this rule can take. */
static int parse_option(struct rule *r, const char *word)
{
	char *end;
	double ms;

	if (strncmp(word, "times=", 6) == 0) {
		r->times = strtol(word + 6, &end, 10);
		return *end || r->times < 0 ? -1 : 0;
	}
	if (strncmp(word, "after=", 6) == 0) {
		r->after = strtol(word + 6, &end, 10);
		return *end || r->after < 0 ? -1 : 0;
	}
	if (strncmp(word, "p=", 2) == 0) {
		r->p = strtod(word + 2, &end);
		return *end || !(r->p >= 0 && r->p <= 1) ? -1 : 0;
	}
	if (strncmp(word, "ms=", 3) == 0) {
		ms = strtod(word + 3, &end);
		if (*end || !(ms >= 0 && ms <= 600000))
			return -1;
		r->delay.tv_sec = (time_t)(ms / 1000);
		r->delay.tv_nsec = (long)((ms - (double)r->delay.tv_sec * 1000) * 1e6);
		return 0;
	}
	return -1;
}

static int parse_line(char *line, int lineno, const char *path)
{
	char *save = NULL, *words[8];
	int n = 0, i;
	struct rule *r;

	for (char *w = strtok_r(line, " \t\r\n", &save); w && n < 8;
	     w = strtok_r(NULL, " \t\r\n", &save))
		words[n++] = w;
	if (n == 0 || words[0][0] == '#')
		return 0;
	if (n == 2 && strcmp(words[0], "seed") == 0) {
		uint64_t seed = strtoull(words[1], NULL, 10);

		atomic_store(&rng_state, seed ? seed : 1);
		return 0;
	}
	if (n < 3 || nrules == MAX_RULES || strlen(words[0]) >= sizeof(r->op) ||
	    strlen(words[1]) >= sizeof(r->glob))
		goto bad;
	r = &rules[nrules];
	strcpy(r->op, words[0]);
	strcpy(r->glob, words[1]);
	r->times = -1;
	r->p = 1.0;
	if (parse_action(words[2], &r->action) == -1)
		goto bad;
	for (i = 3; i < n; i++)
		if (parse_option(r, words[i]) == -1)
			goto bad;
	if (r->action == SLOW && r->delay.tv_sec == 0 && r->delay.tv_nsec == 0)
		goto bad;
	nrules++;
	return 0;
bad:
	fprintf(stderr, "latencyfs: %s:%d: not a rule (OP GLOB ACTION [times=N] "
			"[after=K] [p=P] [ms=M]; at most %d)\n",
		path, lineno, MAX_RULES);
	return -1;
}

int faults_load(const char *path, const char *log)
{
	char line[1024];
	int lineno = 0;
	FILE *f = fopen(path, "r");

	if (f == NULL) {
		fprintf(stderr, "latencyfs: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (parse_line(line, ++lineno, path) == -1) {
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	if (log != NULL) {
		log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (log_fd == -1) {
			fprintf(stderr, "latencyfs: %s: %s\n", log, strerror(errno));
			return -1;
		}
	}
	return 0;
}

static void note(const char *op, int action, const char *path)
{
	char buf[4200];
	int n;

	if (log_fd == -1)
		return;
	n = snprintf(buf, sizeof(buf), "%s %s %s\n", op, action_name(action), path);
	if (n > 0 && (size_t)n < sizeof(buf) && write(log_fd, buf, (size_t)n) != n)
		fprintf(stderr, "latencyfs: fault log: %s\n", strerror(errno));
}

/* The first rule for `op` and `path` (`limits`: among the SHORT and END rules, else
   among the others) that fires now, counting the match of each it passes; NULL when
   none fires. */
static struct rule *fire(const char *op, const char *path, int limits)
{
	int i;

	for (i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];

		if (LIMITS(r->action) != limits)
			continue;
		if ((strcmp(r->op, "*") != 0 && strcmp(r->op, op) != 0) ||
		    fnmatch(r->glob, path, 0) != 0)
			continue;
		if (atomic_fetch_add(&r->seen, 1) < r->after)
			continue;
		if (r->p < 1.0 && draw() >= r->p)
			continue;
		if (r->times >= 0 && atomic_fetch_add(&r->injected, 1) >= r->times)
			continue;
		note(op, r->action, path);
		return r;
	}
	return NULL;
}

int faults_enter(const char *op, const char *path)
{
	struct rule *r;
	struct timespec left;

	if (nrules == 0)
		return 0;
	r = fire(op, path ? path : "", 0);
	if (r == NULL)
		return 0;
	if (r->action != SLOW)
		return -r->action;
	left = r->delay;
	while (nanosleep(&left, &left) == -1 && errno == EINTR)
		;
	return 0;
}

size_t faults_limit(const char *op, const char *path, size_t size)
{
	struct rule *r;

	if (nrules == 0 || size == 0)
		return size;
	r = fire(op, path ? path : "", 1);
	if (r == NULL)
		return size;
	return r->action == END ? 0 : size > 1 ? size / 2 : size;
}

int faults_direct(const char *path)
{
	int i;

	for (i = 0; i < nrules; i++)
		if (LIMITS(rules[i].action) && fnmatch(rules[i].glob, path, 0) == 0)
			return 1;
	return 0;
}
