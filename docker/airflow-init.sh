#!/usr/bin/env bash
# airflow-init (docker-compose.yaml), once per `docker compose up`. It starts as root for one thing: to hand the
# volumes it mounts to the airflow user (registry-control is also mounted by the schema registries' containers, and
# whichever container mounts a volume first decides its owner). Then, as airflow, it migrates the metadata DB and
# writes SimpleAuthManager's passwords file for the UI login: user admin, password $AIRFLOW_ADMIN_PASSWORD (default
# admin, for a local machine; README), and, once, the secrets every Airflow container shares (docker/secret.sh): 64
# random bytes each, kept in the airflow-auth volume across restarts; and the bearer token of /kafka-dr/metrics in the
# metrics-token volume, which the api-server and Prometheus (user nobody, group nogroup 65534) read. Nothing else is
# created.
set -euo pipefail

airflow_uid="$(id -u airflow)"
for dir in /opt/kafka-dr/auth /opt/kafka-dr/registry-control /opt/kafka-dr/metrics; do
    mkdir -p "$dir"
    chown "$airflow_uid:0" "$dir"
done
chmod 0700 /opt/kafka-dr/auth
chmod 0755 /opt/kafka-dr/registry-control
# The metrics token: its owner and Prometheus's group only.
chown "$airflow_uid:65534" /opt/kafka-dr/metrics
chmod 0750 /opt/kafka-dr/metrics
if [[ ! -e /opt/kafka-dr/metrics/token ]]; then
    python -c 'import secrets; print(secrets.token_urlsafe(48), end="")' > /opt/kafka-dr/metrics/token
fi
chown "$airflow_uid:65534" /opt/kafka-dr/metrics/token
chmod 0640 /opt/kafka-dr/metrics/token

# The rest as the airflow user (gid 0, as in Airflow's image), keeping this environment: Python drops the privileges
# because the image has no gosu and su would reset PATH.
export HOME=/home/airflow
exec python - "$airflow_uid" <<'PY'
import json
import os
import secrets
import subprocess
import sys

os.setgroups([])
os.setgid(0)
os.setuid(int(sys.argv[1]))
os.umask(0o077)

subprocess.run(["airflow", "db", "migrate"], check=True)

for name in ("jwt_secret", "api_secret_key"):  # made once: tokens and sessions survive a restart
    path = os.path.join("/opt/kafka-dr/auth", name)
    if not os.path.exists(path):
        with open(path, "x", encoding="utf-8") as out:
            out.write(secrets.token_urlsafe(64))

# Users come from AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS ("name:role,..."); each gets AIRFLOW_ADMIN_PASSWORD.
users = [entry.split(":")[0] for entry in os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(",") if entry]
with open(os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"], "w", encoding="utf-8") as out:
    json.dump({user: os.environ["AIRFLOW_ADMIN_PASSWORD"] for user in users}, out)
print(f"airflow-init: metadata DB migrated; UI users: {', '.join(users)}")
PY
