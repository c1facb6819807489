#!/usr/bin/env bash
# `make demo`: a real Airflow DAG run. Generate a realistic mixed tree, run the example
# DAG example_rcp_local_copy with `airflow dags test` (Airflow on SQLite in $DEMO_DIR),
# print the task's summary, then show independently that the copy matches its source.
set -euo pipefail
demo=${DEMO_DIR:-/tmp/rcp-demo}
here=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$demo"
mkdir -p "$demo"
echo "== generating a mixed tree in $demo/src"
rcp-filegen --preset mixed --summary "$demo/src"
echo

export AIRFLOW_HOME="$demo/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$here/dags_examples"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
echo "== Airflow $(airflow version 2>/dev/null | tail -1) on SQLite in $AIRFLOW_HOME"
airflow db migrate >"$demo/airflow-migrate.log" 2>&1 ||
  { cat "$demo/airflow-migrate.log" >&2; exit 1; }
conf=$(printf '{"src": "%s", "dst": "%s"}' "$demo/src" "$demo/dst")
echo "== airflow dags test example_rcp_local_copy -c '$conf'"
if ! airflow dags test example_rcp_local_copy -c "$conf" >"$demo/dag-run.log" 2>&1; then
  cat "$demo/dag-run.log" >&2
  echo "the DAG run failed (full log above and in $demo/dag-run.log)" >&2
  exit 1
fi
# The copy task's log lines (progress, summary line, verification) and the run's end.
sed -n -E 's/^.*(rcp: .*) \[airflow\.task.*$/\1/p' "$demo/dag-run.log"
sed -n -E 's/^.*DagRun Finished: (dag_id=[^,]*).*(run_duration=[^,]*).*(state=[^,]*).*$/run: \1 \3 \2/p' \
  "$demo/dag-run.log"
summary=$(sed -n 's/^rcp summary: //p' "$demo/dag-run.log")
[ -n "$summary" ] || { echo "no summary in the run's log ($demo/dag-run.log)" >&2; exit 1; }
echo "the copy task's summary (its XCom):"
python3 -m json.tool <<<"$summary"
echo "(full log: $demo/dag-run.log)"
echo

echo "== checking the copy at $demo/dst independently of rcp"
checksums() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
diff <(checksums "$demo/src") <(checksums "$demo/dst")
echo "contents: identical ($(checksums "$demo/dst" | wc -l) files, sha256)"
# Per entry: type, mode, owner, mtime in ns; files add size, link count and sparseness
# (allocated/size), symlinks their target. Directory sizes depend on history, not content.
listing() {
  (cd "$1" && find . \( -type f -printf '%P|f|%m|%u:%g|%T@|%s|%n|%S\n' \) \
    -o \( -type d -printf '%P|d|%m|%u:%g|%T@\n' \) \
    -o -printf '%P|%y|%m|%u:%g|%T@|%l\n' | sort)
}
if ! diff <(listing "$demo/src") <(listing "$demo/dst"); then
  echo "metadata differs (see above)" >&2
  exit 1
fi
echo "metadata: identical (type, mode, owner, size, hard links, holes, ns mtimes, link targets)"
echo "entries: $(listing "$demo/dst" | wc -l)"
echo "the copy landed in $demo/dst"
