# Added by mcpvm (needs = ["postgres"]): starts Debian's PostgreSQL 15 in
# the microVM before the server, on the guest's loopback, with the seeded
# database `mcpvm` (postgres-seed.sql beside this file). The cluster lives
# on /run (tmpfs) and goes with the VM. PostgreSQL refuses to run as root:
# it runs as `nobody`; trust authentication, as the cluster is reachable
# only from inside this VM.
set -e
cd /run
bin=/usr/lib/postgresql/15/bin
data=/run/postgresql/mcpvm
mkdir -p "$data"
chown -R nobody:nogroup /run/postgresql
as_db() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
as_db "$bin/initdb" -D "$data" -U postgres --auth=trust --no-sync \
  --locale=C.UTF-8 --encoding=UTF8 >/run/postgresql/initdb.log 2>&1 \
  || { cat /run/postgresql/initdb.log >&2; exit 1; }
as_db "$bin/pg_ctl" -D "$data" -l /run/postgresql/server.log -w -t 300 \
  -o "-c listen_addresses=127.0.0.1 -c unix_socket_directories=/run/postgresql -c fsync=off -c shared_buffers=16MB" \
  start >/dev/null || { cat /run/postgresql/server.log >&2; exit 1; }
as_db "$bin/psql" -h 127.0.0.1 -U postgres -d postgres -qX -v ON_ERROR_STOP=1 \
  -c "CREATE DATABASE mcpvm" >/dev/null
as_db "$bin/psql" -h 127.0.0.1 -U postgres -d mcpvm -qX -v ON_ERROR_STOP=1 \
  -f /usr/share/mcpvm/postgres-seed.sql >/dev/null
