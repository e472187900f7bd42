#!/usr/bin/env bash
# A throwaway PostgreSQL for tests: `scripts/pg.sh start DIR` initializes a cluster in DIR,
# starts it on a free loopback port as a non-root user and prints its connection URI;
# `scripts/pg.sh stop DIR` stops it. For fault tests: `restart` (immediate), `kill` (down at
# once) and `resume` (up again on the same port). PostgreSQL refuses to run as root, so as root it
# runs as the `postgres` user that Debian's package creates.
set -euo pipefail
cmd=$1
dir=$(realpath -m "$2")  # absolute: port claims name their cluster by it
bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)

as_owner() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# Ports below Linux's ephemeral range (32768-60999), so that no outgoing connection can
# hold the one picked. A port stays claimed (a directory under $claims naming the cluster)
# from start to stop, also while its server is down (`kill`): otherwise a test's own
# cluster started meanwhile could take the port of one that is down, and a client of the
# first that reconnects would find the wrong database (seen with suites run side by side).
# mkdir is the atomic claim; a claim whose cluster directory is gone is stale and taken over.
claims=/tmp/jc-pg-ports
claim_port() {  # FIRST: prints a claimed port that nothing listens on
  mkdir -p "$claims"
  chmod 1777 "$claims" 2>/dev/null || true
  local port owner
  for port in $(seq "$1" 25532); do
    if ! mkdir "$claims/$port" 2>/dev/null; then
      owner=$(cat "$claims/$port/dir" 2>/dev/null || true)
      [[ -n "$owner" && -d "$owner" ]] && continue
      rm -rf "$claims/$port"  # stale: its cluster is gone
      mkdir "$claims/$port" 2>/dev/null || continue
    fi
    echo "$dir" >"$claims/$port/dir"
    if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
      rm -rf "$claims/$port"  # something else listens there
      continue
    fi
    echo "$port"
    return
  done
  echo "pg.sh: no free port in 25432-25532" >&2
  exit 1
}
release_port() {  # every claim naming this cluster (its port file may be gone already)
  local claim
  for claim in "$claims"/*/dir; do
    [[ -f "$claim" && "$(cat "$claim" 2>/dev/null)" == "$dir" ]] && rm -rf "$(dirname "$claim")"
  done
  return 0
}

# Starts the server again on the port it had. A start right after an immediate stop can
# fail (seen once in CI: "pg_ctl: could not start server"), so it is tried a few times.
start_on_own_port() {
  local port
  port=$(cat "$dir/port")
  for attempt in 1 2 3 4 5; do
    if as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=${JC_PG_FSYNC:-off} -c max_connections=200" \
      >/dev/null; then
      return 0
    fi
    echo "pg.sh: start attempt $attempt failed; the server log says:" >&2
    tail -n 5 "$dir/server.log" >&2
    sleep 0.5
  done
  return 1
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    [[ $(id -u) -eq 0 ]] && chown postgres "$dir"
    as_owner "$bindir/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 >"$dir/initdb.log"
    port=25431
    started=0
    for _ in 1 2 3 4 5; do
      port=$(claim_port $((port + 1))) && [[ -n "$port" ]] || exit 1
      echo "$port" >"$dir/port"
      # fsync off: the data is thrown away after the run, and tests should not wait on
      # disks. Benchmarks that claim durability set JC_PG_FSYNC=on.
      if as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=${JC_PG_FSYNC:-off} -c max_connections=200" \
        >/dev/null; then
        started=1
        break
      fi
      release_port
    done
    [[ $started -eq 1 ]] || { echo "pg.sh: PostgreSQL did not start; see $dir/server.log" >&2; exit 1; }
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    ;;
  restart)
    # An immediate restart (as after a crash or a failover): connections drop at once,
    # uncommitted transactions are lost, and the server comes back on the same port.
    as_owner "$bindir/pg_ctl" -D "$dir/data" -w -m immediate stop >/dev/null || true
    start_on_own_port
    ;;
  kill)
    # The database goes away at once, as on a crash (tests: the store is down).
    as_owner "$bindir/pg_ctl" -D "$dir/data" -w -m immediate stop >/dev/null
    ;;
  resume)
    # Back on the port it had.
    start_on_own_port
    ;;
  stop)
    if [[ -f "$dir/data/postmaster.pid" ]]; then
      as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    fi
    release_port
    rm -rf "$dir"
    ;;
  *)
    echo "usage: pg.sh start|restart|kill|resume|stop DIR" >&2
    exit 2
    ;;
esac
