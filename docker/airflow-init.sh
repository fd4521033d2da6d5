#!/usr/bin/env bash
# airflow-init (docker-compose.yaml), once per `docker compose up`. It starts as root for one thing: to hand the
# volumes it mounts to the airflow user (registry-control is also mounted by the schema registries' containers, and
# whichever container mounts a volume first decides its owner). Then, as airflow, it migrates the metadata DB and
# writes SimpleAuthManager's passwords file for the UI login: user admin, password $AIRFLOW_ADMIN_PASSWORD (default
# admin, for a local machine; README). Nothing else is created.
set -euo pipefail

airflow_uid="$(id -u airflow)"
for dir in /opt/kafka-dr/auth /opt/kafka-dr/registry-control; do
    mkdir -p "$dir"
    chown "$airflow_uid:0" "$dir"
done
chmod 0700 /opt/kafka-dr/auth
chmod 0755 /opt/kafka-dr/registry-control

# The rest as the airflow user (gid 0, as in Airflow's image), keeping this environment: Python drops the privileges
# because the image has no gosu and su would reset PATH.
export HOME=/home/airflow
exec python - "$airflow_uid" <<'PY'
import json
import os
import subprocess
import sys

os.setgroups([])
os.setgid(0)
os.setuid(int(sys.argv[1]))
os.umask(0o077)

subprocess.run(["airflow", "db", "migrate"], check=True)

# Users come from AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS ("name:role,..."); each gets AIRFLOW_ADMIN_PASSWORD.
users = [entry.split(":")[0] for entry in os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(",") if entry]
with open(os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"], "w", encoding="utf-8") as out:
    json.dump({user: os.environ["AIRFLOW_ADMIN_PASSWORD"] for user in users}, out)
print(f"airflow-init: metadata DB migrated; UI users: {', '.join(users)}")
PY
