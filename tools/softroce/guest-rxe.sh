#!/usr/bin/env bash
# Inside the Soft-RoCE guest (run by init before the job): two rxe devices on the two ends of a veth
# pair, rxe0 on va (10.0.0.1) and rxe1 on vb (10.0.0.2), both in the one network namespace.
#
# Two namespaces would be the natural model of two hosts, but the 6.1 rxe does its UDP socket and
# route look-ups in the initial namespace only (the first post fails with a local QP operation
# error). So both ends stay here, and policy routing makes packets between the two local addresses
# leave through the veth instead of short-cutting through lo: the veth's tx counters then equal
# rxe's sent_pkts. GID index 1 of each device is its RoCE v2 IPv4-mapped GID.
set -euo pipefail
log() { printf '[guest-rxe] %s\n' "$*" >&2; }

ip link add va type veth peer name vb
ip addr add 10.0.0.1/32 dev va
ip addr add 10.0.0.2/32 dev vb
ip link set va up
ip link set vb up
for k in all default va vb; do
  sysctl -qw "net.ipv4.conf.$k.accept_local=1" "net.ipv4.conf.$k.rp_filter=0"
done
ip rule add pref 100 oif va lookup 100
ip rule add pref 101 oif vb lookup 101
ip rule add pref 110 iif lo to 10.0.0.2 lookup 100
ip rule add pref 111 iif lo to 10.0.0.1 lookup 101
ip route add 10.0.0.2/32 dev va src 10.0.0.1 table 100
ip route add 10.0.0.1/32 dev vb src 10.0.0.2 table 101
# The local table must come after the policy rules, or 10.0.0.x resolves to lo first.
ip rule del pref 0 lookup local
ip rule add pref 1000 lookup local
ip neigh replace 10.0.0.2 lladdr "$(cat /sys/class/net/vb/address)" dev va nud permanent
ip neigh replace 10.0.0.1 lladdr "$(cat /sys/class/net/va/address)" dev vb nud permanent
rdma link add rxe0 type rxe netdev va
rdma link add rxe1 type rxe netdev vb

# Wait (bounded) until both ports are ACTIVE and GID 1 (the IPv4-mapped RoCE v2 GID) is populated.
for dev in rxe0 rxe1; do
  for _ in $(seq 100); do
    state=$(cat "/sys/class/infiniband/$dev/ports/1/state" 2>/dev/null || true)
    gid=$(cat "/sys/class/infiniband/$dev/ports/1/gids/1" 2>/dev/null || true)
    [[ $state == *ACTIVE* && $gid == 0000:0000:0000:0000:0000:ffff:* ]] && break
    sleep 0.1
  done
  [[ $state == *ACTIVE* && $gid == 0000:0000:0000:0000:0000:ffff:* ]] ||
    { log "$dev did not come up: state '$state', gid[1] '$gid'"; exit 1; }
done
log "rxe0 (va 10.0.0.1) and rxe1 (vb 10.0.0.2) are ACTIVE"
