#!/usr/bin/env bash
# The schema registries' command (docker-compose.yaml): runs Confluent's own start script with the store and leader
# eligibility dr_schema_redirect last chose for this registry, and restarts it when they change.
#
# The redirect runs in Airflow's scheduler container and cannot restart this one; its restart command
# (registry-redirect.sh, include/topology.compose.yaml) writes $KDR_REGISTRY_CONTROL/<cluster>.env, which this script
# polls. Without that file the container's own environment applies (dc1: leader-eligible on dc1's store; dc2: a
# follower of dc1's store). Only bash builtins and sleep: the Confluent image is minimal.
set -u

cluster="${KDR_REGISTRY_CLUSTER:?set KDR_REGISTRY_CLUSTER to the cluster of this registry}"
control="${KDR_REGISTRY_CONTROL:-/opt/kafka-dr/registry-control}/${cluster}.env"
run="${KDR_REGISTRY_RUN:-/etc/confluent/docker/run}"
poll="${KDR_REGISTRY_POLL:-1}"
default_store="${SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS:?}"
default_eligible="${SCHEMA_REGISTRY_LEADER_ELIGIBILITY:-true}"
child=0

stop_child() {
    if ((child)); then
        kill -TERM "$child" 2>/dev/null
        wait "$child"
        child=0
    fi
}
trap 'stop_child; exit 143' TERM INT

read_control() {
    local text=""
    if [[ -r "$control" ]]; then
        text="$(<"$control")"
    fi
    printf '%s' "$text"
}

# Export the settings of a control file's text (KAFKASTORE=..., LEADER_ELIGIBLE=true|false); a key missing or
# malformed keeps the container's default, so a bad file cannot inject anything.
apply() {
    local store="$default_store" eligible="$default_eligible" key value
    while IFS='=' read -r key value; do
        case "$key" in
            KAFKASTORE) [[ "$value" =~ ^[A-Za-z0-9.:,_/-]+$ ]] && store="$value" ;;
            LEADER_ELIGIBLE) [[ "$value" == true || "$value" == false ]] && eligible="$value" ;;
        esac
    done <<<"$1"
    export SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS="$store" SCHEMA_REGISTRY_LEADER_ELIGIBILITY="$eligible"
    echo "kafka-dr: schema registry $cluster: kafkastore $store, leader-eligible $eligible"
}

while true; do
    current="$(read_control)"
    apply "$current"
    "$run" &
    child=$!
    while kill -0 "$child" 2>/dev/null; do
        sleep "$poll" &
        wait $!
        if [[ "$(read_control)" != "$current" ]]; then
            echo "kafka-dr: schema registry $cluster: settings changed, restarting"
            stop_child
            continue 2
        fi
    done
    # The registry stopped by itself: exit with its status, the container's restart policy decides.
    wait "$child"
    exit $?
done
