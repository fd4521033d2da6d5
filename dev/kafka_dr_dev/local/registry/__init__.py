"""An embedded, Confluent-compatible Schema Registry for the local two-DC stack.

It exists so the DR runbooks exercise, on a laptop, the moves they make on real registries:
replicating ``_schemas``, a follower registry reading the primary cluster's store, and the
schema redirect (restart with another kafkastore and ``leader.eligibility=true``). Run it with
``python -m kafka_dr_dev.local.registry --help``.

- REST: the Confluent API used by confluent-kafka's SchemaRegistryClient and serdes, with
  Confluent's error codes (``api``); plus ``GET /kdr/leader`` -> ``{"leader", "is_leader", ...}``.
- Store: the ``_schemas`` topic (1 partition, compacted) in Confluent's key/value JSON format;
  every instance replays it from the start and tails it; nothing is kept on local disk (``store``,
  ``state``).
- Authentication: off by default; ``--authentication-method BASIC`` requires HTTP Basic credentials of the users
  in ``--basic-auth-users-file`` or ``$KDR_REGISTRY_USERS`` on every request, as Confluent's
  ``authentication.method=BASIC`` does (``auth``); forwarded writes carry the caller's credentials.
- Leader election: heartbeats on ``_schemas_leader`` in the kafkastore cluster (``election``);
  followers forward writes to the leader and answer 50004 "Leader not known" without one.
- Ids: a new id is the highest id the store ever held plus one, so a registry redirected to a
  cluster holding a replicated copy of ``_schemas`` never reuses an id registered before the
  copy. As with Confluent, a schema registered in the primary but not yet replicated when the
  primary is lost can still collide with one registered after the redirect.
- Limits: compatibility is checked fully for AVRO, by a documented subset for JSON and not at
  all for PROTOBUF (``compat``); PROTOBUF text is not validated; ``normalize`` only means
  compact JSON (which is always applied); no id batches, contexts, metadata or rule sets.
"""
