#!/usr/bin/env bash
# A real one-node Slurm cluster with accounting, for the pipeline's Slurm end-to-end test.
#
#   sudo tests/slurm/setup.sh          # idempotent: installs, configures, starts, waits
#   sudo tests/slurm/teardown.sh       # stops what this script started
#
# What it does (each step is skipped when already done):
#   1. apt-get installs Debian's slurmctld, slurmd, slurmdbd, slurm-client, munge and mariadb-server
#      when any of their binaries is missing.
#   2. munge: creates /etc/munge/munge.key when missing, starts munged as the munge user.
#   3. mariadb: starts mariadbd, creates the database slurm_acct_db and its user for slurmdbd
#      (the Slurm executor plugin reads job states through sacct, which needs real accounting).
#   4. writes /etc/slurm/slurm.conf (this host's short hostname at 127.0.0.1, so no DNS is needed;
#      CPUs from nproc, memory from /proc/meminfo) and /etc/slurm/slurmdbd.conf; restarts a daemon only when its config changed.
#   5. starts slurmdbd, registers the cluster, starts slurmctld and slurmd, waits until sinfo shows
#      the node idle, then creates the account "gicomm" with root (and $SUDO_USER) as members.
#
# No systemd is assumed: the daemons are started directly and their pids kept in $STATE_DIR.
# Environment: GICOMM_SLURM_CLUSTER (default gicomm), GICOMM_SLURM_PARTITION (default debug),
#              GICOMM_SLURM_ACCOUNT (default gicomm), GICOMM_SLURM_WAIT_S (default 60).
set -euo pipefail

CLUSTER=${GICOMM_SLURM_CLUSTER:-gicomm}
PARTITION=${GICOMM_SLURM_PARTITION:-debug}
ACCOUNT=${GICOMM_SLURM_ACCOUNT:-gicomm}
WAIT_S=${GICOMM_SLURM_WAIT_S:-60}
STATE_DIR=/run/gicomm-slurm
CONF_DIR=/etc/slurm
DB_NAME=slurm_acct_db
DB_USER=slurm
DB_PASS=gicomm-slurmdbd

log() { printf '[slurm-setup] %s\n' "$*" >&2; }
die() { printf '[slurm-setup] ERROR: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root (it installs packages and starts system daemons)"
mkdir -p "$STATE_DIR"

# wait_for DESCRIPTION SECONDS COMMAND...: poll COMMAND every 0.2 s until it succeeds.
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "timed out after ${secs}s waiting for $what"
    sleep 0.2
  done
}

# running NAME: true when the pid recorded in $STATE_DIR/NAME.pid (or the daemon's own pid file) is alive.
pid_alive() {
  local f
  for f in "$STATE_DIR/$1.pid" "/run/$1.pid"; do
    if [[ -s $f ]] && kill -0 "$(cat "$f")" 2>/dev/null; then return 0; fi
  done
  return 1
}

# record_pid NAME: keeps the pid of the daemon just started (its own /run/NAME.pid, once it names a
# live process: a daemon rewrites the file after start, and a copy taken mid-write is empty and
# would leave the daemon running after teardown.sh).
record_pid() {
  wait_for "$1's pid file" 10 sh -c "kill -0 \"\$(cat /run/$1.pid)\""
  cp "/run/$1.pid" "$STATE_DIR/$1.pid"
  [[ -s $STATE_DIR/$1.pid ]] || die "could not record the pid of $1"
}

# write_if_changed PATH MODE: replace PATH with stdin when the content differs; returns 0 if changed.
write_if_changed() {
  local path=$1 mode=$2 tmp
  tmp=$(mktemp)
  cat >"$tmp"
  if [[ -f $path ]] && cmp -s "$tmp" "$path"; then rm -f "$tmp"; return 1; fi
  install -m "$mode" "$tmp" "$path"
  rm -f "$tmp"
  return 0
}

# ---------------------------------------------------------------- 1. packages
need_install=()
for pair in slurmctld:slurmctld slurmd:slurmd slurmdbd:slurmdbd sinfo:slurm-client \
  munged:munge mariadbd:mariadb-server; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || [[ -x /usr/sbin/${pair%%:*} ]] || need_install+=("${pair#*:}")
done
if ((${#need_install[@]})); then
  log "installing ${need_install[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Packages' maintainer scripts must not try to start services in a container without systemd.
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  apt-get install -y --no-install-recommends "${need_install[@]}" mariadb-client ||
    { apt-get update && apt-get install -y --no-install-recommends "${need_install[@]}" mariadb-client; }
  rm -f /usr/sbin/policy-rc.d
fi
export PATH=/usr/sbin:/usr/bin:$PATH

# ---------------------------------------------------------------- 2. munge
if [[ ! -s /etc/munge/munge.key ]]; then
  log "creating /etc/munge/munge.key"
  install -d -o munge -g munge -m 0700 /etc/munge
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge /var/log/munge /var/lib/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged --force
  wait_for munged 10 sh -c 'munge -n | unmunge'
  cp /run/munge/munged.pid "$STATE_DIR/munged.pid" 2>/dev/null || true
fi

# ---------------------------------------------------------------- 3. mariadb
install -d -o mysql -g mysql -m 0755 /run/mysqld
if [[ ! -d /var/lib/mysql/mysql ]]; then
  log "initialising the mariadb data directory"
  mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >/dev/null
fi
if ! mysqladmin --protocol=socket ping >/dev/null 2>&1; then
  log "starting mariadbd"
  # setsid + nohup: the server must outlive this script and pytest's process group.
  setsid nohup /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql \
    --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mariadbd.pid \
    --bind-address=127.0.0.1 --innodb-buffer-pool-size=64M \
    </dev/null >/var/log/gicomm-mariadb.log 2>&1 &
  db_pid=$!
  wait_for mariadb 60 sh -c "kill -0 $db_pid || { tail -5 /var/log/gicomm-mariadb.log >&2; exit 0; }; mysqladmin --protocol=socket ping"
  mysqladmin --protocol=socket ping >/dev/null 2>&1 || die "mariadbd did not start; see /var/log/gicomm-mariadb.log"
  echo "$db_pid" >"$STATE_DIR/mariadbd.pid"
fi
mysql --protocol=socket -u root <<SQL
CREATE DATABASE IF NOT EXISTS ${DB_NAME};
CREATE USER IF NOT EXISTS '${DB_USER}'@'localhost' IDENTIFIED BY '${DB_PASS}';
GRANT ALL ON ${DB_NAME}.* TO '${DB_USER}'@'localhost';
FLUSH PRIVILEGES;
SQL

# ---------------------------------------------------------------- 4. configuration
HOST=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
install -d -m 0755 "$CONF_DIR" /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm

slurm_conf_changed=0
write_if_changed "$CONF_DIR/slurm.conf" 0644 <<CONF && slurm_conf_changed=1
# Written by gicomm tests/slurm/setup.sh: a one-node test cluster. Do not edit by hand.
ClusterName=${CLUSTER}
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=100000
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# accounting: sacct (the plugin's job-status query) reads slurmdbd, backed by mariadb
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageEnforce=associations
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
MinJobAge=300
KillWait=5
InactiveLimit=0
Waittime=0
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM_MB} State=UNKNOWN
PartitionName=${PARTITION} Nodes=${HOST} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF

dbd_conf_changed=0
write_if_changed "$CONF_DIR/slurmdbd.conf" 0600 <<CONF && dbd_conf_changed=1
# Written by gicomm tests/slurm/setup.sh. Do not edit by hand.
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
PidFile=/run/slurmdbd.pid
LogFile=/var/log/slurm/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=${DB_NAME}
StorageUser=${DB_USER}
StoragePass=${DB_PASS}
CONF

# ---------------------------------------------------------------- 5. daemons
# stop_daemon NAME: SIGTERM the recorded pid and wait for it to go away.
stop_daemon() {
  local name=$1 pid f
  for f in "$STATE_DIR/$name.pid" "/run/$name.pid"; do
    [[ -s $f ]] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      log "stopping $name (pid $pid)"
      kill "$pid"
      wait_for "$name to stop" 30 sh -c "! kill -0 $pid"
    fi
    rm -f "$f"
  done
}

if ((dbd_conf_changed)); then stop_daemon slurmdbd; fi
if ! pid_alive slurmdbd; then
  log "starting slurmdbd"
  /usr/sbin/slurmdbd
  wait_for slurmdbd 30 sacctmgr -n list cluster
  record_pid slurmdbd
fi
if [[ -z $(sacctmgr -n -P list cluster "$CLUSTER" format=cluster) ]]; then
  log "registering cluster $CLUSTER"
  sacctmgr -i add cluster "$CLUSTER" >/dev/null
fi

if ((slurm_conf_changed)); then stop_daemon slurmd; stop_daemon slurmctld; fi
if ! pid_alive slurmctld; then
  log "starting slurmctld"
  /usr/sbin/slurmctld
  wait_for slurmctld 30 scontrol ping
  record_pid slurmctld
fi
if ! pid_alive slurmd; then
  log "starting slurmd"
  /usr/sbin/slurmd
  record_pid slurmd
fi

# accounts: the plugin validates slurm_account against sacctmgr's associations
if [[ -z $(sacctmgr -n -P list account "$ACCOUNT" format=account) ]]; then
  sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" description="gicomm tests" organization=gicomm >/dev/null
fi
for user in root ${SUDO_USER:-}; do
  if [[ -z $(sacctmgr -n -P list assoc user="$user" account="$ACCOUNT" cluster="$CLUSTER" format=user) ]]; then
    sacctmgr -i add user "$user" account="$ACCOUNT" defaultaccount="$ACCOUNT" cluster="$CLUSTER" >/dev/null
  fi
done

node_state() { sinfo -h -N -n "$HOST" -o '%T' 2>/dev/null | head -1; }
deadline=$((SECONDS + WAIT_S))
while :; do
  state=$(node_state)
  case $state in
    idle | mixed | allocated) break ;;
    down* | drain* | fail*) scontrol update nodename="$HOST" state=resume 2>/dev/null || true ;;
  esac
  ((SECONDS < deadline)) || die "node $HOST not idle after ${WAIT_S}s (state '$state'); see /var/log/slurm/"
  sleep 0.5
done
log "ready: cluster $CLUSTER, node $HOST ($CPUS CPUs, ${MEM_MB} MB) is $state in partition $PARTITION, account $ACCOUNT"
