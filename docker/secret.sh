#!/usr/bin/env bash
# Airflow's `_CMD` for a secret every Airflow container must share (docker-compose.yaml): the value given in the
# environment ($1's override variable, e.g. AIRFLOW_JWT_SECRET), else the random one airflow-init made once in the
# airflow-auth volume. Prints the secret and nothing else.
set -euo pipefail
name="$1" override="$2"
if [[ -n "${!override:-}" ]]; then
    printf '%s' "${!override}"
else
    cat "/opt/kafka-dr/auth/$name"
fi
