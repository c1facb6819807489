/*
 * faults: failures latencyfs injects on request (-o faults=RULES,fault_log=LOG).
 * See faults.c for the rule format and its invariants.
 */
#ifndef LATENCYFS_FAULTS_H
#define LATENCYFS_FAULTS_H

#include <stddef.h>

/* Read the rules in `path` (and open `log` for appending, if not NULL): 0, or -1
   after saying why on stderr. Call once, before serving. */
int faults_load(const char *path, const char *log);

/* Before operation `op` on `path`: 0 to go on, or -errno to answer instead. Sleeps
   first when a `slow` rule matches. Each injection is one line of the log. */
int faults_enter(const char *op, const char *path);

/* How many of `size` bytes a read (or copy) of `path` may move: `size`, or half
   when a `short` rule fires (a short count, which callers must loop on), or none
   when an `eof` rule does (an end of file before the file's size). */
size_t faults_limit(const char *op, const char *path, size_t size);

/* Whether any `short` or `eof` rule could match `path`: such files are opened with
   direct_io, so a short read reaches the application instead of looking like the
   end of the file to the page cache. */
int faults_direct(const char *path);

#endif
