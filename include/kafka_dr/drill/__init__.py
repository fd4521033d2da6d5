"""DR drills as code (`dr_drill`): a probe application, the real failover and failback runs, checks against the
topology's objectives, and the evidence a drill leaves (JSON, self-contained HTML, PDF when Chromium is there).

The evidence JSON, `$KDR_STATE_DIR/drills/<run>.json` (docs/design.md, "DR drills"): `dag_id`, `run_id`,
`scenario`, `from_cluster`, `to_cluster`, `probe_topic`, `rate`, `approval`, `triggered_by`, `started`, `ended`
(ISO, UTC), `topology_file`, `topology_sha256`, `runs` (each inner DAG run: `dag_id`, `run_id`, `state`, `url`,
`report_file`, `rpo_records`, `rto_seconds`, `approved_by`), `timeline` (`at`, `step`, `detail`), `rpo` (`records`,
`exact`, `source`), `rto_seconds` (the failover's: run start to clients switched, the approval's wait left out),
`failback_rto_seconds`, `objectives` (`rpo_records`/`rto_seconds`: `objective`, `measured`, `passed`), `probe`
(`produced`, `delivered`, `lost`, `duplicated`, `sent`, `refused`, `unacknowledged`, `read_twice`), `health_before`
and `health_after` (`flows`: name -> OK|WARN|ERR, `passed`), `checks` (`check`, `passed`, `detail`), `left` (what
the drill could not put back: one line each), `passed`, `failure` (one line, None when passed).
"""
