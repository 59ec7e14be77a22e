#!/usr/bin/env bash
# Starts the shared test services (Redis on 6379, MariaDB on 3306) when they are not running,
# then waits until both answer.
set -euo pipefail

redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
mariadb_up() { mariadb-admin -h 127.0.0.1 -P 3306 -u root --connect-timeout=2 ping >/dev/null 2>&1; }

if ! redis_up; then
  echo "starting redis-server on 127.0.0.1:6379"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
fi
if ! mariadb_up; then
  echo "starting mariadbd"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
fi
for _ in $(seq 1 60); do
  if redis_up && mariadb_up; then exit 0; fi
  sleep 1
done
redis_up || { echo "redis did not answer on 127.0.0.1:6379" >&2; exit 1; }
mariadb_up || { echo "mariadb did not answer on 127.0.0.1:3306" >&2; exit 1; }
