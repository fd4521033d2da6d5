#!/usr/bin/env bash
# dr_schema_redirect's restart command on the compose stack (include/topology.compose.yaml):
#   registry-redirect.sh CLUSTER KAFKASTORE LEADER_ELIGIBLE
# records the registry's new store and eligibility in the volume its container polls (schema-registry-run.sh), which
# restarts it within seconds. It returns before the restart: the redirect (kafka_dr.schema_registry.redirect) waits
# until the registry reports the new store's Kafka cluster id (GET /v1/metadata/id) before it verifies anything, so
# the old process is never the one checked.
set -euo pipefail

if (($# != 3)); then
    echo "usage: $0 CLUSTER KAFKASTORE true|false" >&2
    exit 2
fi
cluster="$1" kafkastore="$2" eligible="$3"
[[ "$cluster" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "bad cluster name '$cluster'" >&2; exit 2; }
[[ "$kafkastore" =~ ^[A-Za-z0-9.:,_/-]+$ ]] || { echo "bad kafkastore '$kafkastore'" >&2; exit 2; }
[[ "$eligible" == true || "$eligible" == false ]] || { echo "leader eligibility must be true or false" >&2; exit 2; }

dir="${KDR_REGISTRY_CONTROL:-/opt/kafka-dr/registry-control}"
tmp="$(mktemp "$dir/.$cluster.XXXXXX")"
printf 'KAFKASTORE=%s\nLEADER_ELIGIBLE=%s\n' "$kafkastore" "$eligible" >"$tmp"
chmod 0644 "$tmp"
mv -f "$tmp" "$dir/$cluster.env" # atomic: the registry's container never reads half a file
echo "schema registry $cluster: kafkastore $kafkastore, leader-eligible $eligible (its container restarts it)"
